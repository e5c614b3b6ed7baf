"""What ``gpu-dedup filter`` is asked to do: one dataclass per filter family, validated where it is made.

The values of the classifier flags (``ClassifierSpec``, ``Retention``, ``parse_classifier``, ``split_threshold``,
``parse_domain_threshold``) are parsed in ``specs`` and importable from here.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from ..config import Device, InputConfig, OnError, cli, did_you_mean, flag, is_int, is_real
from ..errors import ConfigError, MissingFileError
from .specs import (NAME_RE, ClassifierSpec, Direction, Retention, RetentionKind, ScoreKind,  # noqa: F401
                    check_prob, parse_classifier, parse_domain_threshold, split_threshold)

Unit = Literal["document", "paragraph"]
ParagraphAction = Literal["score", "remove"]
ShortParagraphs = Literal["inherit", "skip"]
FAMILIES = ("lid", "rules", "perplexity", "classifiers")
ORDER = FAMILIES  # language ID first (as CCNet and FineWeb), then the rules (no model), perplexity, classifiers
_READ = {f.name: f.default for f in fields(InputConfig)}  # FilterConfig gives these fields filter's flags


@dataclass(frozen=True)
class DomainConfig:
    """Domain rules around language ID, each optional.

    script_prefilter: a document whose letters are more than ``script_fraction`` in one script that only one
    language writes (Hangul -> ko, kana -> ja, Thai, Greek, Hebrew, Georgian, Armenian, ... see
    ``gpu_dedup.filters.domain.SCRIPT_LANGUAGES``) gets that language with probability = the fraction,
    without the model. relax: documents detected as math (more than ``math_line_fraction`` of their
    non-blank lines hold a LaTeX math command or a ``$...$`` pair with math inside: kernels/domain.py) or
    code (ASCII code symbols ``{}[]()<>;:=_#`` at least ``code_symbol_density`` of non-space bytes, or
    Python/C keywords at least ``code_keyword_fraction`` of words) are judged with ``relaxed_lid_threshold``
    instead of the LID threshold (OpenWebMath's two tiers, 002:167: p(en) > 0.3 for math pages) and with every
    ``min`` classifier threshold multiplied by ``relaxed_factor`` (this project's extension of that rule to
    quality classifiers, not OpenWebMath's). ``max`` thresholds (toxicity: the score of a harm) are never
    relaxed for code or math: a code page is no reason to keep more hate speech; thresholds per domain, for
    ``min`` and ``max`` alike, are ``FilterConfig.domain_thresholds`` (002:224)."""

    script_prefilter: bool = field(default=False, metadata=cli(flag(
        "a document more than half in a script one language writes (Hangul, kana, Thai, Greek, ...) gets that "
        "language without the model", set=True)))
    script_fraction: float = 0.5
    relax: bool = field(default=False, metadata=cli(flag(
        "code and math documents (density rules) get --relaxed-lid-threshold and every min classifier threshold "
        "multiplied by --relaxed-factor (max thresholds, e.g. toxicity, are not relaxed)", "--domain-relax",
        set=True)))
    relaxed_lid_threshold: float = field(default=0.3, metadata=cli(flag(None, type="fraction")))
    relaxed_factor: float = field(default=0.5, metadata=cli(flag(None, type="fraction")))
    math_line_fraction: float = 0.05
    code_symbol_density: float = 0.10
    code_keyword_fraction: float = 0.02

    def __post_init__(self) -> None:
        for name in ("script_prefilter", "relax"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"DomainConfig.{name} must be a bool, got {getattr(self, name)!r}")
        check_prob("DomainConfig", "script_fraction", self.script_fraction)
        check_prob("DomainConfig", "relaxed_lid_threshold", self.relaxed_lid_threshold)
        check_prob("DomainConfig", "relaxed_factor", self.relaxed_factor)
        check_prob("DomainConfig", "math_line_fraction", self.math_line_fraction, lo_open=True)
        check_prob("DomainConfig", "code_symbol_density", self.code_symbol_density, lo_open=True)
        check_prob("DomainConfig", "code_keyword_fraction", self.code_keyword_fraction, lo_open=True)


@dataclass(frozen=True)
class FilterConfig(InputConfig):
    """A ``gpu-dedup filter`` run. Every family is off unless given:

    lid: fastText language-ID model (e.g. lid.176.ftz); lang: languages kept (codes without the
    ``__label__`` prefix; empty: any language); lid_threshold: the top language's probability needed.
    classifiers: learned scores (``ClassifierSpec``). perplexity: an n-gram LM (ARPA / KenLM binary) and the
    largest perplexity kept (None: record only), or perplexity_keep: the fraction in (0, 1] of the documents
    with a perplexity that stay, the lowest-perplexity ones (rank: exactly round(fraction * m) of the m
    scored documents, ties by input order); perplexity_buckets: two cut fractions 0 < a < b < 1 that give
    every document CCNet's bucket (column ``perplexity_bucket``: head / middle / tail, by the same rank);
    perplexity_lang: ((language, model), ...) instead of ``perplexity``: one model per language, chosen by
    the document's LID label (column ``perplexity_lang``: the language whose model scored it, "" for none:
    such a document gets no perplexity and is not judged by it; the rank and buckets are per language);
    lm_normalization: for an ARPA without gpu-dedup's header.
    rules: "gopher" for the Gopher rules ("gopher_quality" / "gopher_repetition": one half), or several rule sets
    comma-separated ("gopher,c4,fineweb,chars,url"; ``rules.PRESETS``); rules_off: rule columns switched off (e.g.
    ("gopher_stop_words",)); rule_thresholds: "COLUMN=VALUE" bounds replaced (``rules.with_thresholds``).
    url_blocklist: a file of blocked domains (``rulesets.load_blocklist``; needs "url" in rules and
    url_field, the field / column of each document's URL: ``url_blocked`` is 1 when its host or a parent
    domain is listed; a null or missing URL is not blocked; filter only, run's reader carries no URL).
    c4_remove_lines: with a c4 rule set, the kept documents lose the lines C4's line rules remove (as C4
    writes its pages; ``paragraphs.write_line_cuts``: removed_lines.parquet, reversible); filter only.
    dsir_target: files of target-domain text; select: how
    many documents DSIR keeps among those every other filter kept (int: a count; float in (0, 1]: a fraction
    of them). unit (the fastText models: LID and classifiers): "document" scores the whole document as one
    line; "paragraph" scores every paragraph (runs of non-blank lines) and gives the document the
    byte-weighted mean of its paragraphs' scores (LID: the language with most bytes, its probability the
    byte-weighted mean over those paragraphs). Perplexity with unit="paragraph": every paragraph is scored as
    a document of its own; one with fewer than min_paragraph_tokens LM words is short, and the document's
    perplexity is that of its long paragraphs pooled (10 ** (-sum log10 p / sum tokens)), of all its
    paragraphs when none is long (= the whole document's). short_paragraphs: what a short paragraph is judged
    by, "inherit" (its document's perplexity) or "skip" (never judged by perplexity). The rules always read
    the whole document. paragraph_action: "score" (the document is judged by its scores) or "remove" (the
    language-ID and perplexity tests judge each paragraph, a failing one is cut from its kept document and
    logged; a document is rejected by them only when every paragraph fails: ``paragraphs.py``).
    lid_short_chars: a text the LID model reads (the document, or with unit="paragraph" every paragraph of
    it) of fewer characters (code points, ends trimmed) is short (column lid_short); lid_short_threshold: the
    probability it needs instead of lid_threshold (None: the same; with domain relax the lower applies).
    lid_sentence_agreement: with unit="paragraph" and paragraph_action="remove", a paragraph is also cut unless
    at least this fraction of its sentences (``text.split``'s sentences, each given to the LID model) have its
    majority language (None: off; the seed's 0.8).
    min_perplexity_tokens: a document whose perplexity rests on fewer LM words (unit="document": the
    document's; unit="paragraph": those of the paragraphs pooled into it) is not judged by perplexity
    (column ``perplexity_short``; its perplexity is still recorded); a short paragraph that inherits from
    such a document is not judged either. 0: every document is judged.
    domain_field / domain_model: each document's domain (column ``domain_label``): the value of a field of the
    input, or a fastText domain classifier's top label. domain_thresholds: ((classifier, domain, threshold,
    direction or None), ...): that classifier's threshold for the documents of that domain, ``min`` and
    ``max`` alike; a card's ``thresholds_by[domain_field]`` (``thresholds_by["domain"]`` with domain_model)
    gives more when the classifier's threshold comes from its card.
    order: the order of the test families for ``reason`` (the first failing test names it) and for the
    selections: a permutation of ("lid", "rules", "perplexity", "classifiers"), by default language ID first
    (as CCNet and FineWeb do), then the rules, then the models; a rank selection (perplexity_keep) ranks
    only the documents the families before it kept (002:57), and DSIR selects among the documents every
    family kept.
    audit: random accepted and rejected documents kept for auditing (each); seed: their sample and DSIR's
    Gumbel noise. device: "auto" | "cpu" | "cuda"; threads: CPU threads (None: all)."""

    # the command-line flags (cli/filter.py makes them from this metadata; config.flag); the flags of
    # InputConfig's fields are run's, so filter's are given on those fields here (same defaults)
    id_field: str | None = field(default=_READ["id_field"], kw_only=True,
                                 metadata=cli(flag(None), flag("the input has no ids: make them from file and row",
                                                               "--no-id-field", set=None)))
    text_field: str = field(default=_READ["text_field"], kw_only=True,
                            metadata=cli(flag(None)))
    batch_bytes: int | None = field(default=_READ["batch_bytes"], kw_only=True,
                                    metadata=cli(flag("MiB of text per batch", "--batch-mb", type="mib", floor=1024)))
    on_error: OnError = field(default=_READ["on_error"], kw_only=True, metadata=cli(flag(None)))
    lid: str | None = field(default=None, metadata=cli(flag(
        "fastText language-ID model (.bin / .ftz, e.g. lid.176.ftz)", metavar="MODEL")))
    lang: tuple[str, ...] = field(default=(), metadata=cli(flag(
        "language to keep (repeatable; e.g. en)", append=True, metavar="CODE")))
    lid_threshold: float = field(default=0.5, metadata=cli(flag(
        "probability of the top language needed (default {default})", type="fraction")))
    classifiers: tuple[ClassifierSpec, ...] = field(default=(), metadata=cli(
        flag("fastText classifier; column NAME_score (repeatable)", "--classifier", append=True, default=[],
             metavar="NAME=MODEL[:THRESHOLD]"),
        flag("the label whose probability is NAME's score (default: the model card's, else __label__NAME)",
             "--classifier-label", append=True, default=[], metavar="NAME=LABEL")))
    # --perplexity's text also gives max_perplexity, perplexity_keep or perplexity_lang (cli/filter.py)
    perplexity: str | None = field(default=None, metadata=cli(flag(
        "n-gram LM (ARPA or KenLM binary); documents above MAX perplexity are removed, or all but the FRACTION "
        "with the lowest perplexity (by rank, ties by input order); LANG=MODEL,LANG=MODEL: one model per "
        "language, by the LID label", metavar="MODEL[:MAX|:keep=FRACTION]")))
    max_perplexity: float | None = None
    perplexity_keep: float | None = None
    perplexity_buckets: tuple[float, ...] = field(default=(), metadata=cli(flag(
        "CCNet's buckets: column perplexity_bucket = head (lowest A), middle, tail (above B)", type="cuts",
        metavar="A,B", default=None)))
    perplexity_lang: tuple[tuple[str, str], ...] = ()
    lm_normalization: str | None = field(default=None, metadata=cli(flag(
        "the normalization an ARPA without gpu-dedup's header was trained with: none | "
        "nfkc-lower[,remove-punctuation][,fold-digits]", metavar="MODE")))
    rules: str | None = field(default=None, metadata=cli(flag(
        "heuristic rule sets, comma-separated: gopher (= gopher_quality + gopher_repetition, the paper's "
        "thresholds), c4 (c4_fineweb: without its terminal-punctuation line rule, as FineWeb), fineweb, chars "
        "(non-ASCII / non-alphanumeric fractions), url (URL density)",
        metavar="SET[,SET...]")))
    rules_off: tuple[str, ...] = field(default=(), metadata=cli(flag(
        "switch one rule off, e.g. gopher_stop_words (repeatable)", "--rule-off", append=True, default=[],
        metavar="COLUMN")))
    rule_thresholds: tuple[str, ...] = field(default=(), metadata=cli(flag(
        "replace a rule's bound, e.g. chars_non_ascii_frac=0.3 (MIN:MAX for a two-sided rule; repeatable)",
        "--rule-threshold", append=True, default=[], metavar="COLUMN=VALUE")))
    # the blocklist rule of --rules url reads each document's URL from this field (filter only: run's reader
    # carries no URL)
    url_field: str | None = field(default=None, metadata=cli(flag(
        "the field / column holding each document's URL, read by --url-blocklist (a null or missing URL is "
        "not blocked)", metavar="COLUMN")))
    url_blocklist: str | None = field(default=None, metadata=cli(flag(
        "with --rules url and --url-field: reject documents whose URL's host or a parent domain is listed in "
        "FILE (one domain a line, '#' comments); column url_blocked", metavar="FILE")))
    c4_remove_lines: bool = field(default=False, metadata=cli(flag(
        "with --rules c4 (or c4_fineweb): cut the lines C4's line rules remove from the kept documents, as C4 "
        "does (logged in removed_lines.parquet, reversible)", set=True)))
    dsir_target: tuple[str, ...] = field(default=(), metadata=cli(flag(
        "target-domain documents for DSIR", nargs="+", metavar="FILE")))
    select: int | float | None = field(default=None, metadata=cli(flag(
        "documents DSIR keeps", type="select", metavar="K|FRACTION")))
    dsir_buckets: int = field(default=10_000, metadata=cli(flag(None, type="int")))
    # 000 §5 "keep tests out of fitting": the DSIR target is what the selection is fitted to
    dsir_screen: tuple[str, ...] = field(default=(), metadata=cli(flag(
        "benchmark files: a DSIR target document sharing a 13-gram with an item refuses the run (as `gpu-dedup "
        "screen` matches them)", nargs="+", metavar="BENCHMARK")))
    dsir_screen_drop: bool = field(default=False, metadata=cli(flag(
        "leave the target documents --dsir-screen flags out of the target (listed in run.json)", set=True)))
    domain: DomainConfig = field(default_factory=DomainConfig)
    order: tuple[str, ...] = field(default=ORDER, metadata=cli(flag(
        f"the order of the tests for the reason column: a permutation of {','.join(ORDER)} (the default: "
        f"language ID first)", type="order", metavar="FAMILIES")))
    unit: Unit = field(default="document", metadata=cli(flag(
        "score whole documents (default) or paragraphs (fastText: byte-weighted per document; perplexity: "
        "its long paragraphs pooled)")))
    # unit="paragraph": paragraphs of fewer LM words are not scored on their own (002 §21.1.1: "paragraphs
    # under 50 tokens have high variance in perplexity estimates ... 50-100 tokens is typical")
    min_paragraph_tokens: int = field(default=50, metadata=cli(flag(
        "with --unit paragraph: paragraphs of fewer LM words than this get no perplexity of their own "
        "(default {default}; see --short-paragraphs)", type="int", metavar="N")))
    short_paragraphs: ShortParagraphs = field(default="inherit", metadata=cli(flag(
        "a paragraph under --min-paragraph-tokens inherits its document's perplexity (default) or is skipped: "
        "never judged by perplexity")))
    paragraph_action: ParagraphAction = field(default="score", metadata=cli(flag(
        "with --unit paragraph: score (default: the document is judged) or remove the paragraphs that fail "
        "language ID or perplexity from the kept documents (logged in removed_paragraphs.parquet, reversible)")))
    lid_short_chars: int = field(default=100, metadata=cli(flag(
        "texts the LID model reads that are shorter than this many characters are short (column lid_short; "
        "default {default}, about one sentence)", type="int", metavar="N")))
    lid_short_threshold: float | None = field(default=None, metadata=cli(flag(
        "the probability a short text needs instead of --lid-threshold (default: the same)", type="fraction",
        metavar="P")))
    # 002 §21.2.1 "run sentence-level LID within paragraphs and keep only paragraphs where at least 80% of
    # sentences agree on the majority language"
    lid_sentence_agreement: float | None = field(default=None, metadata=cli(flag(
        "with --unit paragraph --paragraph-action remove: cut a paragraph unless at least this fraction of its "
        "sentences get its majority language from the LID model (the seed's 0.8)", type="fraction", metavar="F")))
    # 002 §21.1.1 "Set a minimum token threshold (50-100 tokens is typical) before applying the perplexity filter"
    min_perplexity_tokens: int = field(default=50, metadata=cli(flag(
        "a document whose perplexity rests on fewer LM words is not judged by perplexity (column "
        "perplexity_short; default {default}, the seed's 50-100; 0: judge every document)", type="int",
        metavar="N")))
    # 002 §21.2.2 "Tag documents by domain before filtering and apply per-domain thresholds"
    domain_field: str | None = field(default=None, metadata=cli(flag(
        "the field / column holding each document's domain (medical, legal, fiction, ...): column domain_label, "
        "the key of --domain-threshold and of a model card's thresholds_by[COLUMN]", metavar="COLUMN")))
    domain_model: str | None = field(default=None, metadata=cli(flag(
        "a fastText domain classifier: its top label is each document's domain (column domain_label; a card's "
        "thresholds_by[\"domain\"] applies)", metavar="MODEL")))
    domain_thresholds: tuple[tuple[str, str, float, str | None], ...] = field(default=(), metadata=cli(flag(
        "classifier NAME's threshold for the documents of DOMAIN, min or max (repeatable; needs --domain-field or "
        "--domain-model)", "--domain-threshold", append=True, default=[], metavar="NAME:DOMAIN=THRESHOLD")))
    audit: int = field(default=500, metadata=cli(flag(
        "random accepted and rejected documents kept for auditing, each (default {default})", type="int")))
    seed: int = field(default=0, metadata=cli(flag(None, type="int")))
    device: str = field(default="auto", metadata=cli(flag(None, choices=get_args(Device))))
    threads: int | None = field(default=None, metadata=cli(flag(None, type="count")))
    progress: bool = False
    write_filtered: bool = field(default=True, metadata=cli(flag("do not write filtered/", "--no-filtered",
                                                                 set=False)))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lid is not None and (not isinstance(self.lid, str) or not self.lid):
            raise ConfigError(f"FilterConfig.lid must be a model path or None, got {self.lid!r}")
        if isinstance(self.lang, str) or not all(isinstance(x, str) and x for x in self.lang):
            raise ConfigError(f"FilterConfig.lang must be a tuple of language codes, got {self.lang!r}")
        if self.lang and self.lid is None and not self.domain.script_prefilter:
            raise ConfigError("FilterConfig.lang needs a language-ID model: pass lid= (--lid lid.176.ftz)")
        check_prob("FilterConfig", "lid_threshold", self.lid_threshold)
        if not all(isinstance(c, ClassifierSpec) for c in self.classifiers):
            raise ConfigError("FilterConfig.classifiers must hold ClassifierSpec values (parse_classifier)")
        names = [c.name for c in self.classifiers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"classifier name {dup[0]!r} is given twice; each needs its own name (column)")
        if self.max_perplexity is not None:
            if not self.has_lm:
                raise ConfigError("FilterConfig.max_perplexity needs a model: pass perplexity=MODEL")
            if not is_real(self.max_perplexity) or not math.isfinite(self.max_perplexity) \
                    or self.max_perplexity <= 1.0:
                raise ConfigError(f"FilterConfig.max_perplexity must be a finite number > 1, got "
                                  f"{self.max_perplexity!r}")
        if self.perplexity_keep is not None:
            if not self.has_lm:
                raise ConfigError("FilterConfig.perplexity_keep needs a model: pass perplexity=MODEL")
            if self.max_perplexity is not None:
                raise ConfigError("FilterConfig.perplexity_keep and max_perplexity are two cuts of one score: "
                                  "give one (a rank fraction or an absolute maximum)")
            if not is_real(self.perplexity_keep) or not 0.0 < self.perplexity_keep <= 1.0:
                raise ConfigError(f"FilterConfig.perplexity_keep must be a fraction in (0, 1] (0.33 keeps the "
                                  f"lowest-perplexity third), got {self.perplexity_keep!r}")
        b = self.perplexity_buckets
        if b:
            if not self.has_lm:
                raise ConfigError("FilterConfig.perplexity_buckets needs a model: pass perplexity=MODEL")
            if isinstance(b, str) or len(b) != 2 or not all(is_real(x) for x in b) \
                    or not 0.0 < b[0] < b[1] < 1.0:
                raise ConfigError(f"FilterConfig.perplexity_buckets must be two fractions 0 < a < b < 1 (CCNet's "
                                  f"head / middle / tail cuts, e.g. (0.33, 0.67)), got {b!r}")
        pl = self.perplexity_lang
        if pl:
            if isinstance(pl, str) or not all(isinstance(x, tuple) and len(x) == 2 and all(
                    isinstance(y, str) and y for y in x) for x in pl):
                raise ConfigError(f"FilterConfig.perplexity_lang must be ((language, model path), ...), got {pl!r}")
            langs = [x[0] for x in pl]
            dup = sorted({x for x in langs if langs.count(x) > 1})
            if dup:
                raise ConfigError(f"FilterConfig.perplexity_lang names language {dup[0]!r} twice")
            if self.perplexity is not None:
                raise ConfigError("FilterConfig.perplexity_lang replaces perplexity (one model for every language): "
                                  "give one of them")
            if self.lid is None and not self.domain.script_prefilter:
                raise ConfigError("FilterConfig.perplexity_lang routes documents by their language: pass lid= "
                                  "(--lid lid.176.ftz)")
        if self.rules is not None:
            from .rules import PRESETS

            sets = [x.strip() for x in self.rules.split(",")] if isinstance(self.rules, str) else [self.rules]
            bad = [x for x in sets if x not in PRESETS]
            if bad or len(set(sets)) != len(sets) or {"c4", "c4_fineweb"} <= set(sets):
                raise ConfigError(f"FilterConfig.rules (--rules) must be one or more of {', '.join(PRESETS)}, "
                                  f"comma-separated, each once; got {self.rules!r}"
                                  f"{did_you_mean(str(bad[0]), PRESETS) if bad else ''}")
        if isinstance(self.rules_off, str) or (self.rules_off and self.rules is None):
            raise ConfigError(f"FilterConfig.rules_off must be a tuple of rule columns, with rules set; got "
                              f"{self.rules_off!r}")
        if isinstance(self.rule_thresholds, str) or (self.rule_thresholds and self.rules is None):
            raise ConfigError(f"FilterConfig.rule_thresholds must be a tuple of 'COLUMN=VALUE', with rules set; got "
                              f"{self.rule_thresholds!r}")
        from .rules import check_rule_actions

        check_rule_actions(self)  # --url-field / --url-blocklist / --c4-remove-lines, before anything is read
        if self.rules is not None:
            self.rules_config()  # an unknown column or bad bound fails here, before anything is read
        if isinstance(self.dsir_target, str):
            raise ConfigError("FilterConfig.dsir_target must be a tuple of paths, not one string")
        if self.select is not None:
            if not self.dsir_target:
                raise ConfigError("FilterConfig.select needs dsir_target (the target-domain text DSIR matches)")
            if is_int(self.select):
                if self.select < 1:
                    raise ConfigError(f"FilterConfig.select must be a count >= 1 or a fraction in (0, 1], got "
                                      f"{self.select!r}")
            elif not is_real(self.select) or not 0.0 < self.select <= 1.0:
                raise ConfigError(f"FilterConfig.select must be a count >= 1 or a fraction in (0, 1], got "
                                  f"{self.select!r}")
        elif self.dsir_target:
            raise ConfigError("FilterConfig.dsir_target needs select= (--select K or FRACTION): how many to keep")
        if isinstance(self.dsir_screen, str) or (self.dsir_screen and not self.dsir_target):
            raise ConfigError(f"FilterConfig.dsir_screen screens the DSIR target: give dsir_target, and the benchmark "
                              f"files as a tuple of paths; got {self.dsir_screen!r}")
        if self.dsir_screen_drop and not self.dsir_screen:
            raise ConfigError("FilterConfig.dsir_screen_drop=True drops the target documents dsir_screen flags: give "
                              "the benchmark files with dsir_screen, or leave dsir_screen_drop out")
        if not is_int(self.dsir_buckets) or self.dsir_buckets < 2:
            raise ConfigError(f"FilterConfig.dsir_buckets must be an int >= 2, got {self.dsir_buckets!r}")
        if not isinstance(self.domain, DomainConfig):
            raise ConfigError(f"FilterConfig.domain must be a DomainConfig, got {self.domain!r}")
        if isinstance(self.order, str) or sorted(self.order) != sorted(FAMILIES):
            raise ConfigError(f"FilterConfig.order must name each of {', '.join(FAMILIES)} once (the order in "
                              f"which their tests give the reason), got {self.order!r}")
        if self.unit not in get_args(Unit):
            raise ConfigError(f"FilterConfig.unit must be 'document' or 'paragraph', got {self.unit!r}")
        if not is_int(self.min_paragraph_tokens) or self.min_paragraph_tokens < 0:
            raise ConfigError(f"FilterConfig.min_paragraph_tokens must be an int >= 0 (LM words; 0: every paragraph "
                              f"with a word is scored on its own), got {self.min_paragraph_tokens!r}")
        if self.short_paragraphs not in get_args(ShortParagraphs):
            raise ConfigError(f"FilterConfig.short_paragraphs must be 'inherit' or 'skip', got "
                              f"{self.short_paragraphs!r}")
        if self.paragraph_action not in get_args(ParagraphAction):
            raise ConfigError(f"FilterConfig.paragraph_action must be 'score' or 'remove', got "
                              f"{self.paragraph_action!r}")
        if self.paragraph_action == "remove":
            if self.unit != "paragraph":
                raise ConfigError("FilterConfig.paragraph_action='remove' needs unit='paragraph' (--unit paragraph): "
                                  "paragraphs are removed by their own scores")
            if not (self.lid or self.domain.script_prefilter or self.has_lm):
                raise ConfigError("FilterConfig.paragraph_action='remove' removes the paragraphs that fail language "
                                  "ID or perplexity: give --lid or --perplexity")
        if not is_int(self.lid_short_chars) or self.lid_short_chars < 0:
            raise ConfigError(f"FilterConfig.lid_short_chars must be an int >= 0 (characters), got "
                              f"{self.lid_short_chars!r}")
        if self.lid_short_threshold is not None:
            check_prob("FilterConfig", "lid_short_threshold", self.lid_short_threshold)
            if self.lid is None:
                raise ConfigError("FilterConfig.lid_short_threshold needs a language-ID model: pass lid= (--lid "
                                  "lid.176.ftz)")
        if not is_int(self.min_perplexity_tokens) or self.min_perplexity_tokens < 0:
            raise ConfigError(f"FilterConfig.min_perplexity_tokens must be an int >= 0 (LM words; 0: every document "
                              f"is judged by perplexity), got {self.min_perplexity_tokens!r}")
        if self.lid_sentence_agreement is not None:
            check_prob("FilterConfig", "lid_sentence_agreement", self.lid_sentence_agreement, lo_open=True)
            if self.lid is None or self.unit != "paragraph" or self.paragraph_action != "remove":
                raise ConfigError("FilterConfig.lid_sentence_agreement cuts paragraphs whose sentences disagree on "
                                  "their language: it needs lid= (--lid), unit='paragraph' and "
                                  "paragraph_action='remove' (--unit paragraph --paragraph-action remove)")
        self._check_domains()
        if not is_int(self.audit) or self.audit < 0:
            raise ConfigError(f"FilterConfig.audit must be an int >= 0, got {self.audit!r}")
        if not is_int(self.seed) or not 0 <= self.seed < 2**63:
            raise ConfigError(f"FilterConfig.seed must be an int in [0, 2**63), got {self.seed!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"FilterConfig.device must be 'auto', 'cpu' or 'cuda', got {self.device!r}")
        if self.threads is not None and (not is_int(self.threads) or self.threads < 1):
            raise ConfigError(f"FilterConfig.threads must be an int >= 1 or None, got {self.threads!r}")
        for path in ([self.lid] if self.lid else []) + ([self.domain_model] if self.domain_model else []) + \
                [c.model for c in self.classifiers] + \
                ([self.perplexity] if self.perplexity else []) + [m for _, m in self.perplexity_lang]:
            if not os.path.exists(path):
                raise MissingFileError(f"model file {path!r} does not exist")
        if not self.any_filter:
            raise ConfigError("nothing to filter: give at least one of --lid, --classifier, --perplexity, "
                              "--rules, --dsir-target (or the script pre-filter)")

    def _check_domains(self) -> None:
        """domain_field / domain_model / domain_thresholds (per-domain classifier thresholds)."""
        if self.domain_field is not None and (not isinstance(self.domain_field, str) or not self.domain_field):
            raise ConfigError(f"FilterConfig.domain_field must be a column name or None, got {self.domain_field!r}")
        if self.domain_model is not None and (not isinstance(self.domain_model, str) or not self.domain_model):
            raise ConfigError(f"FilterConfig.domain_model must be a model path or None, got {self.domain_model!r}")
        if self.domain_field is not None and self.domain_model is not None:
            raise ConfigError("FilterConfig.domain_field and domain_model both give each document's domain: give one "
                              "(--domain-field COLUMN or --domain-model MODEL)")
        dt = self.domain_thresholds
        if isinstance(dt, str) or not all(isinstance(x, tuple) and len(x) == 4 for x in dt):
            raise ConfigError(f"FilterConfig.domain_thresholds must be ((classifier, domain, threshold, direction or "
                              f"None), ...) (parse_domain_threshold), got {dt!r}")
        if dt and self.domain_field is None and self.domain_model is None:
            raise ConfigError("FilterConfig.domain_thresholds need each document's domain: give domain_field "
                              "(--domain-field COLUMN) or domain_model (--domain-model MODEL)")
        specs = {c.name: c for c in self.classifiers}
        seen = set()
        for name, domain, t, direction in dt:
            c = specs.get(name)
            if c is None:
                raise ConfigError(f"--domain-threshold {name}:{domain}={t:g}: no --classifier is named {name!r} "
                                  f"(classifiers: {', '.join(specs) or 'none'})" + did_you_mean(name, list(specs)))
            if (name, domain) in seen:
                raise ConfigError(f"--domain-threshold gives classifier {name!r} two thresholds for domain {domain!r}")
            seen.add((name, domain))
            if c.retention is not None:
                raise ConfigError(f"--domain-threshold {name}:{domain}: classifier {name!r} keeps documents at random "
                                  f"({c.retention.kind}); a threshold per domain needs a threshold classifier")
            if direction is not None and c.threshold is not None and direction != c.direction:
                raise ConfigError(f"--domain-threshold {name}:{domain}={direction}{t:g}: classifier {name!r} keeps "
                                  f"scores {'>=' if c.direction == 'min' else '<='} its threshold ({c.direction}); a "
                                  f"per-domain threshold has the classifier's direction")
            if c.score == "label":
                check_prob(f"--domain-threshold {name}:{domain}", "threshold", t)

    @property
    def any_filter(self) -> bool:
        return bool(self.lid or self.classifiers or self.has_lm or self.rules or self.dsir_target
                    or self.domain.script_prefilter)

    def rules_config(self) -> Any:
        """The ``rules.RulesConfig`` of ``rules``, ``rules_off`` and ``rule_thresholds`` (None without rules)."""
        if self.rules is None:
            return None
        from .rules import RulesConfig, with_thresholds, without

        base = RulesConfig.preset(self.rules, url_blocklist=self.url_blocklist)
        return with_thresholds(without(base, self.rules_off), self.rule_thresholds)

    @property
    def has_lm(self) -> bool:
        """A perplexity model is given: one for every language, or one per language."""
        return bool(self.perplexity or self.perplexity_lang)
