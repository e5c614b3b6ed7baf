"""Models for tests and benchmarks: ``build_random_model`` saves a randomly initialised small BERT
sentence-transformers model, so that nothing is downloaded."""
from __future__ import annotations

import os
from typing import Sequence

from ..semantic.model import need_module


def build_random_model(path: str | os.PathLike, *, words: Sequence[str] = (), hidden: int = 32, layers: int = 2,
                       heads: int = 2, max_seq_length: int = 128, seed: int = 0) -> str:
    """Save a randomly initialised small BERT sentence-transformers model (mean pooling + Normalize) to
    ``path``, for tests and benchmarks: nothing is downloaded. Vocabulary: special tokens, lowercase
    ASCII letters/digits/punctuation (+ "##" continuations) and ``words``. Returns the path."""
    import string

    torch = need_module("torch", "build_random_model")
    tokenizers = need_module("tokenizers", "build_random_model")
    transformers = need_module("transformers", "build_random_model")
    st = need_module("sentence_transformers", "build_random_model")
    try:
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import Normalize, Pooling, Transformer

    path = os.fspath(path)
    hf_dir = os.path.join(path, "_hf")
    os.makedirs(hf_dir, exist_ok=True)
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = string.ascii_lowercase + string.digits
    vocab = special + list(dict.fromkeys([w.lower() for w in words] + list(chars + string.punctuation)
                                         + ["##" + c for c in chars]))
    tk = tokenizers.Tokenizer(tokenizers.models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tk.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    tk.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]",
                                               cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    torch.manual_seed(seed)
    bert = transformers.BertModel(transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=2 * hidden, max_position_embeddings=max(max_seq_length, 8) + 2))
    bert.save_pretrained(hf_dir)
    tok.save_pretrained(hf_dir)
    model = st.SentenceTransformer(modules=[Transformer(hf_dir, max_seq_length=max_seq_length),
                                            Pooling(hidden, "mean"), Normalize()], device="cpu")
    model.save(path)
    import shutil

    shutil.rmtree(hf_dir)
    return path
