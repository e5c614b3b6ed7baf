"""The scorers of one filter run, loaded once: ``Scorers.columns`` turns a batch of text into its columns of
``scores.parquet``. It is the one scoring step of the package: ``gpu-dedup filter``'s pass and dedup's pass 1
(``run --score`` and ``run``'s filter flags, through ``prefilter.ScoreStep``) both call it. The decisions on
those columns are ``stage.decide_filter``'s.

Device traffic: the batch's UTF-8 bytes (or its paragraphs') go to the device once per batch, and every
fastText model (LID and each classifier) reads that one copy (``*_arrays``); dedup's pass 1 hands over the
copy it already made for normalization.

Unit: "document" gives the model the whole document as one line (newlines become spaces: what fastText
users do); "paragraph" scores every paragraph (a run of non-blank lines) on its own and gives the document
the byte-weighted mean of its paragraphs' scores; LID then takes the language with the most paragraph bytes
and the byte-weighted mean probability of the paragraphs that chose it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..constants import LABEL_PREFIX
from ..errors import ConfigError
from ..io.text import arrow_text_buffers
from ..runtime import device as dev
from ..text.split import split_units, whitespace_words
from .config import ClassifierSpec, FilterConfig
from .domain import domain_stats
from .paragraphs import ParagraphScores, pooled_perplexity
from .selection import uniform_draws

logger = logging.getLogger(__name__)


@dataclass
class Classifier:
    """A loaded classifier with its resolved positive label, threshold and direction (and where they came
    from: "flag", "card" or "none")."""

    spec: ClassifierSpec
    model: Any
    label: str
    threshold: float | None
    direction: str
    source: str
    values: np.ndarray | None = None  # score="expected": the integer value of every label, in model order
    by_domain: dict[str, float] = field(default_factory=dict)  # domain -> threshold (domain_thresholds, card)
    by_domain_source: dict[str, str] = field(default_factory=dict)  # domain -> "flag" | "card"

    def describe(self) -> dict[str, Any]:
        r = self.spec.retention
        keeps = None if self.threshold is None else \
            f"{self.spec.column} {'>=' if self.direction == 'min' else '<='} {self.threshold}"
        if r is not None:
            keeps = f"at random: {r.formula()} (a uniform draw per document, column {self.draw_column})"
        return {"name": self.spec.name, "column": self.spec.column, "model": self.model.describe(),
                "label": self.label, "threshold": self.threshold, "direction": self.direction,
                "threshold_from": self.source, "keeps": keeps,
                **({"thresholds_by_domain": {d: {"threshold": t, "from": self.by_domain_source[d]}
                                             for d, t in sorted(self.by_domain.items())}} if self.by_domain else {}),
                "score": ("expected value sum k * p(k) over the labels "
                          + ", ".join(f"{lab}={int(v)}" for lab, v in zip(self.model.labels, self.values))
                          + " (fastText's reported probabilities)") if self.values is not None
                else f"P({self.label})",
                **({"retention": {"kind": r.kind, "alpha": r.alpha, "center": r.center, "slope": r.slope,
                                  "formula": r.formula()}} if r is not None else {})}

    @property
    def draw_column(self) -> str:
        return f"{self.spec.name}_draw"

    def need(self, domain_label: np.ndarray | None, relaxed: np.ndarray | None, factor: float) -> np.ndarray:
        """float64 (n,): the threshold each document is judged by (NaN: none, the score is only recorded):
        the threshold of its domain (``by_domain``, for ``domain_label`` object (n,)) when there is one, else
        the classifier's, a ``min`` one multiplied by ``factor`` where ``relaxed`` (bool (n,): --domain-relax's
        code / math documents; ``max`` thresholds are never relaxed)."""
        n = len(domain_label) if domain_label is not None else len(relaxed)
        need = np.full(n, np.nan if self.threshold is None else float(self.threshold))
        if self.threshold is not None and self.direction == "min" and relaxed is not None:
            need[relaxed] *= factor
        if domain_label is not None:
            for value, t in self.by_domain.items():
                need[domain_label == value] = t
        return need

    def scores(self, text: pa.Array, device: str) -> np.ndarray:
        """float64 (n,): this classifier's score of every text (NaN: a text with no feature)."""
        return self.scores_arrays(*text_buffers(text, device), device)

    def scores_arrays(self, data, offsets, device: str) -> np.ndarray:
        """``scores`` of the texts whose UTF-8 bytes are data uint8 (T,), offsets int64 (n + 1,), host or
        device arrays (``text_buffers``: already where ``device``'s kernels read them, nothing is copied)."""
        if self.values is None:
            return np.asarray(self.model.label_prob_arrays(data, offsets, self.label, device=device), np.float64)
        idx, prob = self.model.predict_arrays(data, offsets, k=-1, device=device)
        got = idx >= 0
        out = np.where(got, self.values[np.maximum(idx, 0)] * np.nan_to_num(prob), 0.0).sum(axis=1)
        return np.where(got.any(axis=1), out, np.nan)


def load_classifier(spec: ClassifierSpec, domain_thresholds: tuple = (), domain_key: str | None = None
                    ) -> Classifier:
    """Load ``spec.model`` and resolve its label / threshold / direction: the flag's, else the card's
    (``spec.card``, else ``<model>.json``: ``train-classifier`` and ``calibrate`` write it), else
    ``__label__<name>`` and no threshold. Per-domain thresholds: ``domain_thresholds``' for this classifier
    (``FilterConfig.domain_thresholds``), then, when the threshold comes from the card, the card's
    ``thresholds_by[domain_key]`` for the other domains (``domain_key``: the run's domain field, or "domain")."""
    from .fasttext import load_fasttext
    from .train import POSITIVE_NAMES, read_card

    model = load_fasttext(spec.model)
    if spec.score == "expected":
        return _with_domains(_expected_classifier(spec, model), {}, domain_thresholds, None)
    card = read_card(spec.model, spec.card) or {}
    label, source = spec.label, "flag"
    if label is None and card.get("positive_label"):
        label = card["positive_label"]
    if label is None:
        own = LABEL_PREFIX + spec.name
        # a two-label model's label named like a positive class (train-classifier's rule: 1, hq, pos, good, ...)
        named = [x for x in model.labels if x[len(LABEL_PREFIX):].lower() in POSITIVE_NAMES] \
            if len(model.labels) == 2 else []
        if own in model.labels:
            label = own
        elif len(model.labels) == 1:
            label = model.labels[0]
        elif len(named) == 1:
            label = named[0]
            logger.info("classifier %s: score = P(%s), the label named like a positive class (choose another "
                        "with --classifier-label %s=LABEL)", spec.name, label, spec.name)
        else:
            raise ConfigError(f"classifier {spec.name!r}: model {spec.model!r} has labels "
                              f"{', '.join(model.labels[:10])}{' ...' if len(model.labels) > 10 else ''}; none is "
                              f"{own!r}: name the classifier after its positive label (e.g. "
                              f"{model.labels[0][len(LABEL_PREFIX):]}={spec.model}) or train it with "
                              f"train-classifier, whose card names the label")
    if not label.startswith(LABEL_PREFIX) and LABEL_PREFIX + label in model.labels:
        label = LABEL_PREFIX + label
    if label not in model.labels:
        raise ConfigError(f"classifier {spec.name!r}: label {label!r} is not one of the model's labels "
                          f"({', '.join(model.labels[:10])})")
    threshold, direction = spec.threshold, spec.direction
    if threshold is None and card.get("threshold") is not None:
        threshold, direction, source = float(card["threshold"]), card.get("direction", "min"), "card"
    elif threshold is None and spec.retention is None:
        source = "none"
        logger.warning("classifier %s: no threshold given and no model card beside %s: its score is recorded, "
                       "nothing is removed for it (give NAME=MODEL:THRESHOLD)", spec.name, spec.model)
    if spec.retention is not None:
        threshold, source = None, "flag"  # the draw decides, not the card's threshold
    return _with_domains(Classifier(spec, model, label, threshold, direction, source), card, domain_thresholds,
                         domain_key)


def _with_domains(c: Classifier, card: dict, domain_thresholds: tuple, domain_key: str | None) -> Classifier:
    """``c`` with its per-domain thresholds: the flags' (``FilterConfig.domain_thresholds``), then the card's
    ``thresholds_by[domain_key]`` for the domains the flags leave, when the classifier's threshold is the card's
    (a threshold given on the command line replaces the card's, per-domain ones included)."""
    for name, domain, t, direction in domain_thresholds:
        if name != c.spec.name:
            continue
        if direction is not None and direction != c.direction:
            raise ConfigError(f"--domain-threshold {name}:{domain}={direction}{t:g}: classifier {name!r} keeps scores "
                              f"{'>=' if c.direction == 'min' else '<='} its threshold ({c.direction}, from its "
                              f"{c.source}); a per-domain threshold has the classifier's direction")
        c.by_domain[domain], c.by_domain_source[domain] = float(t), "flag"
    if c.source == "card" and domain_key is not None:
        for domain, t in ((card.get("thresholds_by") or {}).get(domain_key) or {}).items():
            if t is not None and domain not in c.by_domain:
                c.by_domain[domain], c.by_domain_source[domain] = float(t), "card"
        if any(v == "card" for v in c.by_domain_source.values()):
            logger.info("classifier %s: the card's thresholds per %s apply: %s", c.spec.name, domain_key,
                        ", ".join(f"{d} {t:g}" for d, t in sorted(c.by_domain.items())
                                  if c.by_domain_source[d] == "card"))
    return c


def _expected_classifier(spec: ClassifierSpec, model) -> Classifier:
    """An ordinal / multi-class model scored by its expected label value: every label must be an integer."""
    values = []
    for lab in model.labels:
        name = lab[len(LABEL_PREFIX):] if lab.startswith(LABEL_PREFIX) else lab
        try:
            values.append(int(name))
        except ValueError:
            raise ConfigError(f"classifier {spec.name!r}: 'expected' needs integer labels (e.g. __label__0 .. "
                              f"__label__5), but model {spec.model!r} has {lab!r}") from None
    if spec.threshold is None:
        logger.warning("classifier %s: expected score recorded, nothing removed for it (give "
                       "NAME=MODEL:expected>=X)", spec.name)
    return Classifier(spec, model, "expected", spec.threshold, spec.direction,
                      "flag" if spec.threshold is not None else "none", np.asarray(values, np.float64))


def url_reading(cfg: FilterConfig) -> dict[str, Any]:
    """``io.iter_batches``' options that carry each document's URL (``url_field``) as ``Batch.scope``: a null
    or missing URL read as null (not blocked), the errors naming --url-field; {} without a URL field."""
    if cfg.url_field is None:
        return {}
    return {"scope_field": cfg.url_field, "scope_nullable": True, "scope_flag": "--url-field"}


def field_values(files, cfg: FilterConfig, name: str) -> np.ndarray:
    """object (n,): the value of field / column ``name`` of every input document, in row order (a string; an
    integer as its decimal text; None where it is null or missing), read once more (``io.iter_batches``' scope
    field, its errors naming --domain-field)."""
    from .. import io
    from ..runtime.device import batch_bytes

    parts = [np.asarray(b.scope.cast(pa.string()).to_numpy(zero_copy_only=False), dtype=object)
             for b in io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field,
                                      batch_bytes=batch_bytes(cfg.batch_bytes, "cpu"), on_error=cfg.on_error,
                                      scope_field=name, scope_nullable=True, scope_flag="--domain-field")]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=object)


@dataclass
class Scorers:
    """Everything a batch is scored with (None / empty where the run does not use it)."""

    cfg: FilterConfig
    device: str
    lid: Any = None
    classifiers: list[Classifier] = field(default_factory=list)
    lm: Any = None
    lms: dict[str, Any] = field(default_factory=dict)  # perplexity_lang: language -> its model
    rules: Any = None
    blocklist: Any = None  # url_blocklist's ``rulesets.Blocklist``, read once when the run starts
    domain_model: Any = None  # domain_model: a fastText classifier whose top label is the domain

    @property
    def has_lm(self) -> bool:
        return self.lm is not None or bool(self.lms)

    @classmethod
    def load(cls, cfg: FilterConfig, device: str) -> "Scorers":
        s = cls(cfg, device)
        if cfg.lid:
            from .fasttext import load_fasttext

            s.lid = load_fasttext(cfg.lid)
            missing = [lang for lang in cfg.lang if LABEL_PREFIX + lang not in s.lid.labels]
            if missing:
                raise ConfigError(f"--lang {missing[0]!r} is not a label of the LID model {cfg.lid!r} (it knows "
                                  f"{len(s.lid.labels)} languages, e.g. "
                                  f"{', '.join(x[len(LABEL_PREFIX):] for x in s.lid.labels[:8])})")
        key = cfg.domain_field or ("domain" if cfg.domain_model else None)
        s.classifiers = [load_classifier(c, cfg.domain_thresholds, key) for c in cfg.classifiers]
        if cfg.domain_model:
            from .fasttext import load_fasttext

            s.domain_model = load_fasttext(cfg.domain_model)
            domains = [x.removeprefix(LABEL_PREFIX) for x in s.domain_model.labels]
            # a threshold for a domain the model never predicts would apply to no document: a typo, the wrong model
            for n, d, *_ in (t for t in cfg.domain_thresholds if t[1] not in domains):
                raise ConfigError(f"--domain-threshold {n}:{d}: {d!r} is not a label of --domain-model "
                                  f"{cfg.domain_model!r} (its domains: {', '.join(domains[:20])}): fix the name")
        if cfg.perplexity:
            from .lm import LMNormalization, load_lm

            norm = LMNormalization.parse(cfg.lm_normalization) if cfg.lm_normalization else None
            s.lm = load_lm(cfg.perplexity, normalization=norm, device=device)
        if cfg.perplexity_lang:
            from .lm import LMNormalization, load_lm

            known = s.lid.labels if s.lid is not None else []
            for lang, path in cfg.perplexity_lang:
                if s.lid is not None and LABEL_PREFIX + lang not in known:
                    raise ConfigError(f"perplexity_lang {lang!r}={path!r}: {lang!r} is not a label of the LID model "
                                      f"{cfg.lid!r}, so no document would reach this model (it knows "
                                      f"{len(known)} languages, e.g. "
                                      f"{', '.join(x[len(LABEL_PREFIX):] for x in known[:8])})")
            norm = LMNormalization.parse(cfg.lm_normalization) if cfg.lm_normalization else None
            s.lms = {lang: load_lm(path, normalization=norm, device=device) for lang, path in cfg.perplexity_lang}
        if cfg.rules:
            s.rules = cfg.rules_config()
            if s.rules.url_blocklist is not None:
                from .rulesets import load_blocklist

                s.blocklist = load_blocklist(s.rules.url_blocklist)  # a bad file fails before anything is read
        return s

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.lid is not None:
            out["lid"] = {"model": self.lid.describe(), "lang": list(self.cfg.lang),
                          "threshold": self.cfg.lid_threshold}
        if self.classifiers:
            out["classifiers"] = [c.describe() for c in self.classifiers]
        if self.domain_model is not None or self.cfg.domain_field:
            out["domain"] = {"field": self.cfg.domain_field, "column": "domain_label",
                             **({"model": self.domain_model.describe(), "rule": "the model's top label"}
                                if self.domain_model is not None else
                                {"rule": "the field's value (null: no domain, the classifiers' own thresholds)"})}
        if self.lms:
            out["perplexity"] = {"models": {lang: m.describe() for lang, m in self.lms.items()},
                                 "routing": "by the LID label; a document in another language gets no perplexity "
                                            "(perplexity_lang = \"\") and is not judged by it",
                                 "max": self.cfg.max_perplexity, "keep_fraction": self.cfg.perplexity_keep,
                                 "buckets": list(self.cfg.perplexity_buckets) or None, "rank": "per language"}
        if self.lm is not None:
            out["perplexity"] = {"model": self.lm.describe(), "max": self.cfg.max_perplexity,
                                 "keep_fraction": self.cfg.perplexity_keep,
                                 "buckets": list(self.cfg.perplexity_buckets) or None}
        if self.rules is not None:
            from .rules import describe

            out["rules"] = describe(self.rules)
            if self.blocklist is not None:
                out["url_blocklist"] = {**self.blocklist.describe(), "url_field": self.cfg.url_field,
                                        "no_url": "a null or missing URL is not blocked"}
        return out

    # -------------------------------------------------------------------------------------- scoring
    def no_rows(self) -> dict[str, Any]:
        """The columns of no document (every scorer's, zero rows): an input, or a file, without a document is
        decided, counted and written as one with documents, not a table of the id, row and empty columns only."""
        part = self.columns(pa.array([], pa.large_string()), pa.array([], pa.string()), 0)
        part.pop("paragraph_scores", None)  # (the caller's concat of the batches' paragraphs holds none)
        return part

    def columns(self, text: pa.Array, ids: pa.Array, row_start: int, buffers: tuple | None = None,
                urls: pa.Array | None = None) -> dict[str, Any]:
        """The columns of one batch: id, row, empty, the domain rules' (when on), and every scorer's (text:
        pa.large_string, no nulls; ``buffers``: its UTF-8 bytes already on the device, as ``score``; the
        domain rules read the same copy as the fastText models; ``urls``: each document's URL, null for
        none, for the blocklist rule: the reader's ``Batch.scope`` of ``url_field``)."""
        cfg, n = self.cfg, len(text)
        # words: the retained-token accounting of run.json (002:57 "Quantify the expected token retention")
        part: dict[str, Any] = {"id": ids, "row": np.arange(row_start, row_start + n, dtype=np.int64),
                                "empty": _blank(text), "words": whitespace_words(text)}
        skip = None
        if cfg.domain.script_prefilter or cfg.domain.relax:
            if buffers is None:  # one copy for the domain rules and the fastText models
                buffers = text_buffers(text, self.device)
            ds = domain_stats(text, cfg.domain, self.device, buffers=buffers)
            part["domain"] = ds.domain
            if cfg.domain.script_prefilter:
                skip = ds.script_lang != ""
                part["script_lang"], part["script_frac"] = ds.script_lang, ds.script_frac
        part.update(self.score(text, skip_lid=skip if self.lid is not None else None, buffers=buffers, urls=urls))
        if self.domain_model is not None:  # the whole document's top label, whatever the unit
            names = np.array([x[len(LABEL_PREFIX):] if x.startswith(LABEL_PREFIX) else x
                              for x in self.domain_model.labels] + [""], dtype=object)
            idx, _ = self.domain_model.predict_arrays(*(buffers if buffers is not None
                                                        else text_buffers(text, self.device)), k=1, device=self.device)
            part["domain_label"] = names[idx[:, 0]]
        for c in self.classifiers:
            if c.spec.retention is not None:
                part[c.draw_column] = uniform_draws(cfg.seed, c.spec.name, part["row"])
        if skip is not None:
            if "lid_label" not in part:
                part["lid_label"] = np.full(n, "", dtype=object)
                part["lid_prob"] = np.full(n, np.nan)
            part["lid_label"][skip] = part["script_lang"][skip]
            part["lid_prob"][skip] = part["script_frac"][skip]
        if "paragraph_scores" in part and skip is not None:  # the script pre-filter's language, for every paragraph
            ps = part["paragraph_scores"]
            mine = skip[ps.row]
            ps.lid_label[mine], ps.lid_prob[mine] = part["script_lang"][ps.row[mine]], part["script_frac"][ps.row[mine]]
        if self.lms:
            part.update(self.score_by_language(text, part["lid_label"], part.get("paragraph_scores")))
        return part

    def score(self, text: pa.Array, skip_lid: np.ndarray | None = None,
              buffers: tuple | None = None, urls: pa.Array | None = None) -> dict[str, np.ndarray]:
        """The scorers' columns of one batch (text: pa.large_string, no nulls). ``skip_lid``: documents whose
        language the script pre-filter already gave (not run through the model). ``buffers``: (data, offsets)
        of ``text``'s UTF-8 bytes already where the device's kernels read them (dedup's pass 1 has them);
        None: made here (``text_buffers``), once for every fastText model."""
        cols: dict[str, np.ndarray] = {}
        n = len(text)
        paragraph = self.cfg.unit == "paragraph"
        fasttext = bool(self.classifiers) or self.lid is not None
        # the batch's paragraphs, split once for every model that reads them
        pu = paragraph_units(text) if paragraph and (fasttext or self.has_lm) else None
        units = pu[:3] if pu is not None else None
        ps = None
        if pu is not None and self.cfg.paragraph_action == "remove":  # every paragraph's scores, for the cut
            ps = cols["paragraph_scores"] = ParagraphScores.blank(pu[0], pu[3], pu[4], pu[5])
        # ... and the fastText models' input (the whole texts, or the paragraphs) on the device once
        buf = None
        if fasttext:
            buf = text_buffers(units[1], self.device) if units is not None else \
                (buffers if buffers is not None else text_buffers(text, self.device))
        if self.lid is not None:
            label = np.full(n, "", dtype=object)
            prob = np.full(n, np.nan)
            todo = np.flatnonzero(~skip_lid) if skip_lid is not None else np.arange(n)
            if len(todo) == n:
                label, prob, ulab, uprob = self._lid(n, buf, units)
                if ps is not None:
                    ps.lid_label, ps.lid_prob = ulab, uprob
            elif len(todo):
                sub = text.take(pa.array(todo))
                sub_units = paragraphs(sub) if paragraph else None
                sub_buf = text_buffers(sub_units[1] if paragraph else sub, self.device)
                label[todo], prob[todo], ulab, uprob = self._lid(len(sub), sub_buf, sub_units)
                if ps is not None:  # the same paragraphs, those of the documents the model read
                    mine = np.isin(ps.row, todo)
                    ps.lid_label[mine], ps.lid_prob[mine] = ulab, uprob
            cols["lid_label"], cols["lid_prob"] = label, prob
            if ps is not None and self.cfg.lid_sentence_agreement is not None:
                ps.lid_agreement = sentence_agreement(self.lid, pu[1], self.device)
            # a text the model read is short: the document, or each of its paragraphs (the longest one)
            if pu is None:
                chars = pc.utf8_length(pc.utf8_trim_whitespace(text)).to_numpy(zero_copy_only=False)
            else:
                chars = np.zeros(n, np.int64)
                np.maximum.at(chars, pu[0], pu[5])
            cols["lid_short"] = np.asarray(chars) < self.cfg.lid_short_chars
        for c in self.classifiers:
            cols[c.spec.column] = self._per_unit(n, units, c.scores_arrays(*buf, self.device))
        if self.lm is not None:
            if pu is None:
                res = self.lm.score(text, device=self.device)
                cols["perplexity"] = np.asarray(res["perplexity"], np.float64)
                cols["perplexity_words"] = np.asarray(res["tokens"], np.int64) - np.asarray(res["sentences"],
                                                                                          np.int64)
            else:
                cols["perplexity"], cols["perplexity_words"] = self._paragraph_lm(self.lm, n, pu,
                                                                                  np.arange(len(pu[0])), ps)
            cols["perplexity_short"] = cols["perplexity_words"] < self.cfg.min_perplexity_tokens
        if self.rules is not None:
            from .rules import rule_scores

            url_list = urls.to_pylist() if urls is not None else None
            for name, values in rule_scores(text, self.rules, device=self.device, urls=url_list).items():
                cols[name] = np.asarray(values)
        return cols

    def score_by_language(self, text: pa.Array, labels: np.ndarray,
                          paragraph_scores=None) -> dict[str, np.ndarray]:
        """perplexity (float64, NaN without a model) and perplexity_lang (object: the language whose model
        scored the document, "" for none) of one batch, each document by the model of its LID ``labels``
        (unit="paragraph": its paragraphs, pooled; their own scores into ``paragraph_scores``)."""
        n = len(text)
        ppl = np.full(n, np.nan)
        words = np.zeros(n, np.int64)
        used = np.full(n, "", dtype=object)
        pu = paragraph_units(text) if self.cfg.unit == "paragraph" else None
        for lang, lm in self.lms.items():
            rows = np.flatnonzero(labels == lang)
            if len(rows) and pu is None:
                res = lm.score(text.take(pa.array(rows)), device=self.device)
                ppl[rows] = np.asarray(res["perplexity"], np.float64)
                words[rows] = np.asarray(res["tokens"], np.int64) - np.asarray(res["sentences"], np.int64)
            elif len(rows):  # the paragraphs of the documents in this language
                got, got_words = self._paragraph_lm(lm, n, pu, np.flatnonzero(np.isin(pu[0], rows)), paragraph_scores)
                ppl[rows], words[rows] = got[rows], got_words[rows]
            used[rows] = lang
        return {"perplexity": ppl, "perplexity_lang": used, "perplexity_words": words,
                "perplexity_short": words < self.cfg.min_perplexity_tokens}

    def _paragraph_lm(self, lm, n: int, pu: tuple, prows: np.ndarray, ps) -> tuple[np.ndarray, np.ndarray]:
        """The perplexity and the LM words behind it of each of ``n`` documents from its paragraphs ``prows`` of ``pu``
        (``paragraph_units``), each scored as a document of its own (``paragraphs.pooled_perplexity``); their
        own words and perplexity go to ``ps`` (a ``ParagraphScores``, or None)."""
        res = lm.score(pu[1].take(pa.array(prows, pa.int64())), device=self.device)
        tok = np.asarray(res["tokens"], np.int64)
        words = tok - np.asarray(res["sentences"], np.int64)
        if ps is not None:
            ps.words[prows], ps.perplexity[prows] = words, np.asarray(res["perplexity"], np.float64)
        return pooled_perplexity(n, pu[0][prows], np.asarray(res["logprob"], np.float64), tok, words,
                                 self.cfg.min_paragraph_tokens)

    def _lid(self, n: int, buf: tuple, units) -> tuple[np.ndarray, np.ndarray, Any, Any]:
        """(language, probability) of each of ``n`` documents: of the whole text (units None; ``buf`` its
        ``text_buffers``), or from its paragraphs (``units`` = ``paragraphs(text)``, ``buf`` the paragraphs'),
        then each paragraph's own (top label, probability; None, None for units None)."""
        names = np.array([x[len(LABEL_PREFIX):] if x.startswith(LABEL_PREFIX) else x for x in self.lid.labels]
                         + [""], dtype=object)
        idx, prob = self.lid.predict_arrays(*buf, k=1, device=self.device)
        if units is None:
            return names[idx[:, 0]], prob[:, 0], None, None
        doc, _para, weight = units
        idx, prob = idx[:, 0], prob[:, 0]
        label = np.full(n, "", dtype=object)
        out = np.full(n, np.nan)
        if len(doc):
            # the language with most paragraph bytes per document, then the byte-weighted mean probability
            # of the paragraphs that chose it
            valid = idx >= 0
            key = doc[valid].astype(np.int64) * (len(self.lid.labels) + 1) + idx[valid]
            uniq, inv = np.unique(key, return_inverse=True)
            wsum = np.bincount(inv, weights=weight[valid])
            psum = np.bincount(inv, weights=(weight * np.nan_to_num(prob))[valid])
            udoc, ulab = uniq // (len(self.lid.labels) + 1), uniq % (len(self.lid.labels) + 1)
            order = np.lexsort((ulab, -wsum, udoc))  # per document: most bytes first, ties to the lower label
            first = np.ones(len(order), bool)
            first[1:] = udoc[order][1:] != udoc[order][:-1]
            pick = order[first]
            label[udoc[pick]] = names[ulab[pick]]
            out[udoc[pick]] = psum[pick] / np.maximum(wsum[pick], 1e-300)
        return label, out, names[idx], np.where(idx >= 0, prob, np.nan)

    @staticmethod
    def _per_unit(n: int, units, scores: np.ndarray) -> np.ndarray:
        """The score of each of ``n`` documents from ``scores`` float64: the documents' own (units None), or
        the byte-weighted mean over each document's paragraphs (``units`` = ``paragraphs(text)``; ``scores``
        one per paragraph)."""
        if units is None:
            return np.asarray(scores, np.float64)
        doc, _para, weight = units
        p = np.asarray(scores, np.float64)
        ok = ~np.isnan(p)
        wsum = np.bincount(doc[ok], weights=weight[ok], minlength=n)
        psum = np.bincount(doc[ok], weights=(weight * p)[ok], minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(wsum > 0, psum / np.where(wsum > 0, wsum, 1), np.nan)


def paragraphs(text: pa.Array) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """(document index int64 (P,), paragraph text pa.large_string (P,), UTF-8 bytes float64 (P,)) of every
    paragraph of every document: the package's one paragraph (``text.split``: a maximal run of non-blank
    lines, trimmed of ASCII whitespace), split by the paragraph-dedup kernel on the host, where the models
    read their text."""
    return paragraph_units(text)[:3]


def paragraph_units(text: pa.Array) -> tuple[np.ndarray, pa.Array, np.ndarray, np.ndarray, np.ndarray,
                                              np.ndarray]:
    """``paragraphs``' three, then each paragraph's byte start and end in its document (int64 (P,)) and its
    characters (code points, int64 (P,))."""
    if isinstance(text, pa.ChunkedArray):  # the regex this replaced took any pyarrow string column
        text = text.combine_chunks()
    data, offsets = arrow_text_buffers(text)
    units = split_units(data, offsets, "paragraph", "cpu")
    start, end = units.start, units.end
    doc = np.repeat(np.arange(len(text), dtype=np.int64), np.diff(units.unit_off))
    size = end - start
    arr = span_texts(data, start, end)
    para, para_off = np.frombuffer(arr.buffers()[2], np.uint8), np.frombuffer(arr.buffers()[1], np.int64)
    base = offsets[:-1][doc] if len(doc) else np.zeros(0, np.int64)
    # code points = bytes that are no UTF-8 continuation byte (every paragraph holds at least one byte)
    chars = size - np.add.reduceat((para & 0xC0) == 0x80, para_off[:-1], dtype=np.int64) if len(start) else size
    return doc, arr, size.astype(np.float64), start - base, end - base, chars.astype(np.int64)


def span_texts(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> pa.Array:
    """pa.large_string (u,): the bytes data[start[i]:end[i]] of disjoint spans in ascending order (a split's
    units: paragraphs, sentences)."""
    size = np.asarray(end - start, np.int64)
    off = np.zeros(len(start) + 1, np.int64)
    np.cumsum(size, out=off[1:])
    # the spans are disjoint and in order, so their bytes are the data bytes inside some span
    inside = np.zeros(data.shape[0] + 1, np.int8)
    np.add.at(inside, start, 1)
    np.add.at(inside, end, -1)
    out = data[np.cumsum(inside[:-1], dtype=np.int8) > 0]
    return pa.LargeStringArray.from_buffers(len(start), pa.py_buffer(off), pa.py_buffer(out))


def sentence_agreement(model: Any, paragraphs: pa.Array, device: str) -> np.ndarray:
    """float64 (P,): for each paragraph, the fraction of its sentences (``text.split``'s rule) whose top label by
    the LID ``model`` is the label most of them have (002:174 "run sentence-level LID within paragraphs and keep
    only paragraphs where at least 80% of sentences agree on the majority language"); sentences with no feature
    the model knows are not counted; NaN for a paragraph with no counted sentence."""
    if isinstance(paragraphs, pa.ChunkedArray):
        paragraphs = paragraphs.combine_chunks()
    data, offsets = arrow_text_buffers(paragraphs)
    units = split_units(data, offsets, "sentence", "cpu")
    p = len(paragraphs)
    para = np.repeat(np.arange(p, dtype=np.int64), np.diff(units.unit_off))
    out = np.full(p, np.nan)
    if not len(para):
        return out
    idx, _ = model.predict_arrays(*text_buffers(span_texts(data, units.start, units.end), device), k=1,
                                  device=device)
    lab = idx[:, 0].astype(np.int64)
    ok = lab >= 0
    total = np.bincount(para[ok], minlength=p)
    key, count = np.unique(para[ok] * (len(model.labels) + 1) + lab[ok], return_counts=True)
    top = np.zeros(p, np.int64)
    np.maximum.at(top, key // (len(model.labels) + 1), count)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, top / np.maximum(total, 1), np.nan)


def text_buffers(text: pa.Array, device: str) -> tuple[Any, Any]:
    """(data uint8 (T,), offsets int64 (n + 1,)) of ``text``'s UTF-8 bytes where ``device``'s kernels read
    them: the Arrow buffers themselves on the CPU, one copy on a GPU (only the text's own bytes when it is a
    slice of a larger buffer, offsets rebased to them)."""
    from .fasttext import texts_to_arrays

    data, offsets = texts_to_arrays(text)
    if dev.resolve_device(device) != "cuda":
        return data, offsets
    if offsets[0] > 0 or offsets[-1] < data.shape[0]:
        data, offsets = data[offsets[0]:offsets[-1]], offsets - offsets[0]
    return dev.to_device(data, "cuda"), dev.to_device(offsets, "cuda")


def _blank(text: pa.Array) -> np.ndarray:
    """bool (n,): documents with no non-whitespace character."""
    stripped = pc.utf8_trim_whitespace(text)
    return (pc.binary_length(stripped).to_numpy(zero_copy_only=False) == 0)
