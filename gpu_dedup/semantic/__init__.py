"""SemDeDup: semantic near-duplicates by embedding -> spherical k-means -> within-cluster cosine.

Stages (each a module of this package; ``run.semantic_dedup`` chains them over streamed input):

1. **Embed** (``model.load_model``, ``embed.embed_texts``): a sentence-transformers model given by name or
   local path, never downloaded (``resolve_model_path``). Texts are cut to ``chars_per_token x
   max_seq_length`` characters before tokenization (10 by default: tokens past ``max_seq_length`` are
   dropped anyway and an English WordPiece token averages ~4-5 characters, so a 1 MB document costs what a
   2.5 KB one does; 0 = no cut), sorted by length, tokenized two batches ahead in threads, and run under
   ``torch.inference_mode``: float16 on a GPU, float32 on the CPU. Rows are L2-normalised in float32.
   Long texts (``long_text``): ``"truncate"`` (default) embeds the first ``max_seq_length`` tokens, so documents
   sharing a long beginning look identical; ``"mean"`` embeds windows of ``max_seq_length`` tokens covering the
   whole text and takes their token-weighted mean (``embed.embed_documents``). Either way every text's tokens
   are counted (a copy of the model's tokenizer, in a thread next to the embedding) and semantic.json's
   ``long_text`` reports how many documents are longer than ``max_seq_length``; on the CPU the first forward
   pass is timed and a long estimated embedding time is logged before the run (``embed_estimate``).
   ``embed.EmbeddingCache`` stores them per text hash (128-bit XXH64 pair of the raw UTF-8 text) under a
   key of the model's file contents and the settings, so an unchanged text is never embedded twice.
2. **Cluster** (``clustering.kmeans``): spherical k-means (centroids renormalised each iteration;
   assignment by largest inner product), seeded; FAISS (its GPU index when the installed faiss has GPUs)
   or a small torch implementation (used on a GPU when faiss has no GPU support, or when faiss is missing).
   Optionally fit on a sample, then assign every row.
3. **Order** (``select.cluster_order``): within each cluster, by the keep rule: ``hard`` = lowest cosine to
   the centroid first (the outlier is kept, as SemDeDup and NeMo do), ``easy`` = highest first, ``random``
   = seeded permutation, ``max:<column>`` = largest value of a numeric input column first (NaN last).
   Ties always go to input order.
4. **Pairwise** (``pairwise.max_sim_to_earlier``, ``pairwise.within_cluster_max_sim``): for member j of a
   cluster, the largest cosine to an *earlier* member, in column blocks (memory O(n_c x block)); numpy on
   the CPU, torch on a GPU (one algorithm over a small numpy/torch adapter). The matched member is the
   earliest one within ``constants.SEMANTIC_TIE_TOL`` of that largest cosine, so that float32 rounding
   (block size, BLAS threads, device) never changes ``semantic_nearest_id``.
5. **Decide** (``select``): the rule below gives each document keep/reason/match (``decisions_table``,
   ``semantic_decisions``) and an eps sweep (``removal_sweep``); ``merge_decisions`` folds them into the
   lexical decisions. ``comparison.compare`` reports lexical vs semantic removals of one run.

Decision rule (the contract; pinned by tests)
    ``eps`` is a cosine *distance*: member j is a ``semantic_duplicate`` iff
    ``max_{i earlier} cos(x_i, x_j) >= 1 - eps`` (NeMo Curator's ``>=``; the SemDeDup repository uses a
    strict ``>``, which differs only on exact equality). A larger eps removes more. The first member of
    every cluster is kept. The comparison is exact on the float32 similarity (``threshold32``); two
    identical texts can come out at cosine 0.9999999, so eps = 0 may keep exact copies (use eps >= 1e-6).

Chain rule (``chain``)
    ``"all"`` (default, = SemDeDup and NeMo): earlier means every earlier member, removed or not. With
    A~B and B~C but not A~C, both B and C are removed. It is one vectorised pass, the similarity column
    does not depend on eps (so one pass gives the whole eps sweep), and results match the reference
    implementations. ``"kept"``: earlier means earlier members that are *kept* (greedy against the kept
    set, like the lexical ``representative`` policy): C survives above, and every removed document's
    match is a kept document. It removes less, and needs a sequential step per block (host, Numba).

The similarity convention of ``max_sim_to_earlier`` follows NeMo's golden test: a member with no earlier
member (or no earlier member at positive cosine) gets similarity 0 and match 0.

Modules, in stage order: ``config``, ``model``, ``embed``, ``clustering``, ``pairwise``, ``select``, ``run``,
and ``comparison``. torch, sentence-transformers and faiss are imported on first use only: importing this
package does not load them.
"""
from .clustering import Clusters, kmeans
from .comparison import PAIR_KINDS, REGIONS, CompareResult, compare, plot_pairs
from .config import (
    CACHE_FORMAT,
    DEFAULT_MODEL,
    DEFAULT_SWEEP,
    SEMANTIC_REASONS,
    SEMANTIC_SCHEMA,
    Chain,
    KMeansBackend,
    LongText,
    Precision,
    SemanticConfig,
    default_n_clusters,
    semantic_keep_column,
    threshold32,
)
from .embed import Embedded, EmbeddingCache, FirstBatch, count_tokens, embed_documents, embed_texts, text_hashes
from .model import (
    embedding_dtype,
    load_model,
    model_fingerprint,
    resolve_model_path,
    resolve_torch_device,
    torch_device,
)
from .pairwise import max_sim_to_earlier, within_cluster_max_sim
from .run import SemanticResult, semantic_dedup
from .select import cluster_order, decisions_table, merge_decisions, removal_sweep, semantic_decisions

__all__ = [
    "CACHE_FORMAT", "DEFAULT_MODEL", "DEFAULT_SWEEP", "PAIR_KINDS", "REGIONS", "SEMANTIC_REASONS", "SEMANTIC_SCHEMA",
    "Chain", "Clusters", "CompareResult", "Embedded", "EmbeddingCache", "FirstBatch", "KMeansBackend", "LongText",
    "Precision", "SemanticConfig", "SemanticResult", "cluster_order", "compare", "count_tokens", "decisions_table",
    "default_n_clusters", "embed_documents", "embed_texts", "embedding_dtype", "kmeans", "load_model",
    "max_sim_to_earlier", "merge_decisions", "model_fingerprint", "plot_pairs", "removal_sweep", "resolve_model_path",
    "resolve_torch_device", "semantic_decisions", "semantic_dedup", "semantic_keep_column", "text_hashes",
    "threshold32", "torch_device", "within_cluster_max_sim",
]
