"""The rule catalogue: YAML files under `rules/`, one per family, loaded into frozen rules.

Kept free of libcst and torch so `migrate rule X` and `migrate rules` start instantly.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from migrator.catalogue import rule_cache, units
from migrator.catalogue.impls import KNOWN_IMPLS
from migrator.ground.kinds import FixKind, Severity, values
from migrator.ground.model import FAMILIES, FAMILY_PREFIX, FixInfo
from migrator.ground.resources import data_dir


class CatalogueError(ValueError):
    """The shipped or user-supplied catalogue is malformed (exit 2, never a traceback)."""


@dataclass(frozen=True)
class Example:
    code: str
    at: tuple[str, ...] = ()  # "line:col" positions the code must be reported at
    fixed: str | None = None
    target: str = "npu"
    file: str = "example.py"  # the file name the example is scanned as (`Dockerfile`, `ds_config.json`, ...)
    reason: str | None = None  # a declined example: the precheck's reason, as scan and fix report it

    @property
    def language(self) -> str:
        """Markdown code-block language for the example's file."""
        from pathlib import PurePosixPath

        name = self.file.lower()
        suffix = PurePosixPath(name).suffix
        if "dockerfile" in name or "containerfile" in name:
            return "dockerfile"
        return {".py": "python", ".sh": "bash", ".slurm": "bash", ".sbatch": "bash", ".yaml": "yaml", ".yml": "yaml",
                ".json": "json", ".ipynb": "json", ".toml": "toml", ".txt": "text"}.get(suffix, "text")


@dataclass(frozen=True)
class Docs:
    why: str
    use_instead: str
    fix_notes: str
    references: tuple[str, ...]


@dataclass(frozen=True)
class Effort:
    """Minutes a person needs for one manual site of the rule, and why (the report prints both)."""

    minutes: float
    why: str
    source: str = "family"  # "family": the family default in the rule file; "rule": the rule's own
    per: str = "site"  # "site": each manual site; "file": once per file; "symbol": once per distinct symbol in the run


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    family: str
    severity: str
    message: str
    fix_title: str
    fix: str  # "none" | "rename" | "unit" (the module `units.unit_module(family, name)`)
    fix_kind: str  # exact | numerics | manual
    docs: Docs
    invalid: tuple[Example, ...]
    valid: tuple[Example, ...]
    declined: tuple[Example, ...] = ()  # sites the rule's fix declines, each with its reason
    symbols: tuple[tuple[str, str | None], ...] = ()  # (pattern, replacement)
    impl: str | None = None
    default_enabled: bool = True
    scope: str = "all"  # "imports": report imports (and decorators), not every use (triton: its kernel pass judges
    # the uses); "library": the import and every use of a name under the library (each a site; effort once per
    # library with its import, `reporters/effort.py`); "all": every use, each its own action
    effort: Effort = Effort(15, "a manual site")
    source: str = ""  # the catalogue file that defines it (`device.yaml`)

    @property
    def unit_module(self) -> str | None:
        """The dotted module of the rule's unit (`fix: unit` or `rename`), None without a fix."""
        return units.module_name(self.family, self.name, self.fix)

    def render(self, template: str, symbol: str, replacement: str | None, **extra: str) -> str:
        fields = {"symbol": symbol, "replacement": replacement or "", **extra}
        try:
            return template.format(**fields)
        except (KeyError, IndexError):
            return template

    def message_for(self, symbol: str, replacement: str | None = None, **extra: str) -> str:
        return self.render(self.message, symbol, replacement, **extra)

    def fix_info(self, symbol: str, replacement: str | None = None, **extra: str) -> FixInfo | None:
        if self.fix_kind == FixKind.MANUAL or self.fix == "none":
            return None
        return FixInfo(kind=self.fix_kind, title=self.render(self.fix_title, symbol, replacement, **extra))


@dataclass(frozen=True)
class SymbolMatch:
    rule: Rule
    replacement: str | None
    pattern: str


class Catalogue:
    def __init__(self, rules: dict[str, Rule], digest: str):
        self.rules = rules
        self.digest = digest
        self._exact: dict[str, tuple[Rule, str | None]] = {}
        self._wild: list[tuple[str, Rule, str | None]] = []
        for rule in rules.values():
            for pattern, replacement in rule.symbols:
                if pattern.endswith("*"):
                    self._wild.append((pattern[:-1], rule, replacement))
                else:
                    self._exact[pattern] = (rule, replacement)
        self._wild.sort(key=lambda item: -len(item[0]))
        # the wildcards a name can match, by the name's first dotted segment (longest first, as `_wild`);
        # a prefix without a dot could match any name, so then every name looks at them all
        self._wild_by_root: dict[str, list[tuple[str, Rule, str | None]]] = {}
        for item in self._wild:
            self._wild_by_root.setdefault(item[0].split(".", 1)[0], []).append(item)
        self._wild_everywhere = any("." not in item[0] for item in self._wild)
        self._memo: dict[str, SymbolMatch | None] = {}
        self._families: dict[str, tuple[Rule, ...]] = {}  # `by_family`, asked twice for every scanned module
        # first dotted segment of every symbol: lets the engine skip names cheaply
        self.roots = frozenset(p.split(".", 1)[0] for r in rules.values() for p, _ in r.symbols)
        # the one map of pattern-rule names (the scanner, its checkers and the units' detectors use it)
        self.by_impl: dict[str, Rule] = {r.impl: r for r in rules.values() if r.impl}

    def impl_rule(self, impl: str) -> Rule | None:
        """The pattern rule a checker or detector reports by its `impl:` name; None when this catalogue
        leaves that rule out. A name no rule can carry is a programming error, never dropped silently."""
        rule = self.by_impl.get(impl)
        if rule is None and impl not in KNOWN_IMPLS:
            raise CatalogueError(f"no pattern rule is named {impl!r} (migrator/catalogue/impls.py lists them)")
        return rule

    def get(self, code: str) -> Rule | None:
        return self.rules.get(code.upper())

    def by_family(self, family: str) -> list[Rule]:
        rules = self._families.get(family)
        if rules is None:
            rules = self._families[family] = tuple(r for r in self.rules.values() if r.family == family)
        return list(rules)

    def match_symbol(self, qualname: str) -> SymbolMatch | None:
        """Exact names beat wildcards; a longer wildcard (`a.b.*`) beats a shorter one (`a.*`).

        A wildcard `pkg.*` matches `pkg` itself and everything below it; `$env.NCCL_*` matches
        any name with that prefix.
        """
        if qualname in self._memo:
            return self._memo[qualname]
        result = self._match(qualname)
        if len(self._memo) < 100_000:
            self._memo[qualname] = result
        return result

    def covering(self, name: str) -> list[SymbolMatch]:
        """The rules whose symbols name `name`: a dotted name as the scanner matches it, a bare name
        (`flash_attn_varlen_func`, `FusedAdam`) against the last component of every exact symbol.
        One match per rule, in catalogue order (`migrate ops` for APIs outside torch)."""
        if "." in name:
            hit = self.match_symbol(name)
            return [hit] if hit else []
        found: dict[str, SymbolMatch] = {}
        for symbol, (rule, replacement) in self._exact.items():
            if symbol.rsplit(".", 1)[-1] == name and rule.code not in found:
                found[rule.code] = SymbolMatch(rule, replacement, symbol)
        return list(found.values())

    def _match(self, qualname: str) -> SymbolMatch | None:
        hit = self._exact.get(qualname)
        if hit:
            return SymbolMatch(hit[0], hit[1], qualname)
        wild = self._wild if self._wild_everywhere else self._wild_by_root.get(qualname.split(".", 1)[0], ())
        for prefix, rule, replacement in wild:
            if qualname.startswith(prefix) or (prefix.endswith(".") and qualname == prefix[:-1]):
                if replacement and replacement.endswith("*"):
                    # `torch.cuda.amp.*` -> `torch.npu.amp.*`; the module itself maps to `torch.npu.amp`
                    replacement = (replacement[:-1] + qualname[len(prefix) :]).rstrip(".")
                return SymbolMatch(rule, replacement, prefix + "*")
        return None


def _as_text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CatalogueError(f"{where}: expected text, got {type(value).__name__}")
    return value.strip()


def _examples(raw: Any, where: str) -> tuple[Example, ...]:
    out = []
    for i, item in enumerate(raw or []):
        if isinstance(item, str):
            item = {"code": item}
        if not isinstance(item, dict) or "code" not in item:
            raise CatalogueError(f"{where}[{i}]: an example needs `code`")
        at = item.get("at") or []
        if isinstance(at, str):
            at = [at]
        out.append(
            Example(
                code=item["code"],
                at=tuple(str(a) for a in at),
                fixed=item.get("fixed"),
                target=item.get("target", "npu"),
                file=item.get("file", "example.py"),
                reason=item.get("reason"),
            )
        )
    return tuple(out)


def _effort(raw: Any, where: str, default: Effort | None, source: str) -> Effort:
    if raw is None and default is not None:
        return default
    if not isinstance(raw, dict) or not isinstance(raw.get("minutes"), (int, float)) or raw["minutes"] < 0:
        raise CatalogueError(f"{where}: `effort` needs `minutes` (a number >= 0) and `why`")
    why = _as_text(raw.get("why"), where)
    if not why:
        raise CatalogueError(f"{where}: `effort` needs a one-line `why`")
    per = raw.get("per", "site")
    if per not in ("site", "file", "symbol"):
        raise CatalogueError(f"{where}: `effort.per` must be site, file or symbol")
    return Effort(float(raw["minutes"]), why, source, per)


def _check_header(raw: dict[str, Any], family: str, where: str) -> None:
    for key in ("code", "name", "severity", "message", "fix_kind", "docs", "examples"):
        if key not in raw:
            raise CatalogueError(f"{where}: missing `{key}`")
    code = raw["code"]
    if not code.startswith(FAMILY_PREFIX[family]) or not code[len(FAMILY_PREFIX[family]) :].isdigit():
        raise CatalogueError(f"{where}: code must be {FAMILY_PREFIX[family]} + 3 digits")
    if raw["severity"] not in values(Severity):
        raise CatalogueError(f"{where}: severity must be one of {', '.join(values(Severity))}")
    if raw["fix_kind"] not in values(FixKind):
        raise CatalogueError(f"{where}: fix_kind must be one of {', '.join(values(FixKind))}")


def _symbols(raw: dict[str, Any], where: str) -> tuple[tuple[str, str | None], ...]:
    symbols: list[tuple[str, str | None]] = []
    for item in raw.get("symbols") or []:
        if isinstance(item, str):
            symbols.append((item, None))
        elif isinstance(item, dict) and "name" in item:
            symbols.append((item["name"], item.get("replacement")))
        else:
            raise CatalogueError(f"{where}: bad symbol entry {item!r}")
    rename = raw.get("rename")
    if rename:
        old, new = rename["from"], rename["to"]
        symbols = [
            (pat, rep if rep is not None else (new + pat[len(old) :] if pat.startswith(old) else None))
            for pat, rep in symbols
        ]
    if not symbols and not raw.get("impl"):
        raise CatalogueError(f"{where}: needs `symbols` or `impl`")
    return tuple(symbols)


def _check_fix(raw: dict[str, Any], family: str, where: str) -> str:
    """The rule's `fix:` (none, rename or unit), its example and its module checked; an `impl:` it names
    must be a detection the code implements (`migrator/catalogue/impls.py`)."""
    fix = str(raw.get("fix", "none"))
    if fix not in units.FIX_VALUES:
        raise CatalogueError(f"{where}: `fix` must be one of {', '.join(units.FIX_VALUES)}, not {fix!r}")
    if raw["fix_kind"] != FixKind.MANUAL and fix == "none":
        raise CatalogueError(f"{where}: fix_kind {raw['fix_kind']} needs a `fix`")
    invalid = (raw["examples"] or {}).get("invalid") or []
    if fix != "none" and not any(ex.get("fixed") for ex in invalid if isinstance(ex, dict)):
        raise CatalogueError(f"{where}: a rule with a fix needs an invalid example with its `fixed` text")
    module = units.module_name(family, str(raw["name"]), fix)
    if module is not None and not units.exists(module):
        raise CatalogueError(f"{where}: `fix: {fix}` needs its rule module {units.module_path(module)}, which does not exist")
    impl = raw.get("impl")
    if impl is not None and impl not in KNOWN_IMPLS:
        raise CatalogueError(f"{where}: `impl: {impl}` names no detection the code implements"
                             " (the known names are in migrator/catalogue/impls.py)")
    return fix


def _rule(raw: dict[str, Any], family: str, source: str, family_effort: Effort | None = None) -> Rule:
    code = raw.get("code", "?")
    where = f"{source}: rule {code}"
    _check_header(raw, family, where)
    symbols = _symbols(raw, where)
    fix = _check_fix(raw, family, where)
    docs = raw["docs"] or {}
    examples = raw["examples"] or {}
    return Rule(
        code=code,
        name=raw["name"],
        family=family,
        severity=raw["severity"],
        message=_as_text(raw["message"], where),
        fix_title=_as_text(raw.get("fix_title"), where),
        fix=fix,
        fix_kind=raw["fix_kind"],
        docs=Docs(
            why=_as_text(docs.get("why"), where),
            use_instead=_as_text(docs.get("use_instead"), where),
            fix_notes=_as_text(docs.get("fix_notes"), where),
            references=tuple(docs.get("references") or ()),
        ),
        invalid=_examples(examples.get("invalid"), f"{where} examples.invalid"),
        valid=_examples(examples.get("valid"), f"{where} examples.valid"),
        declined=_examples(examples.get("declined"), f"{where} examples.declined"),
        symbols=symbols,
        impl=raw.get("impl"),
        default_enabled=bool(raw.get("default_enabled", True)),
        scope=raw.get("scope", "all"),
        effort=_effort(raw.get("effort"), f"{where} effort", family_effort, "rule"),
        source=source,
    )


def catalogue_files(folder: Path | None = None) -> list[Path]:
    folder = folder or data_dir("rules")
    return sorted(folder.glob("*.yaml"))


def load_raw(path: Path, data: bytes | None = None) -> dict[str, Any]:
    """One catalogue file's YAML (`data`: its bytes, already read), checked for `family` and `rules`."""
    import yaml  # only when the rules are built from their YAML (`rule_cache` keeps them built)

    try:
        text = path.read_text(encoding="utf-8") if data is None else _text(data)
        loaded = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError) as exc:
        raise CatalogueError(f"{path}: cannot read the rule catalogue: {exc}") from None
    if not isinstance(loaded, dict) or "family" not in loaded or "rules" not in loaded:
        raise CatalogueError(f"{path}: a catalogue file needs `family` and `rules`")
    return loaded


def _text(data: bytes) -> str:
    """`data` decoded as `Path.read_text` would: UTF-8, universal newlines."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


@lru_cache(maxsize=4)
def load_catalogue(folder: Path | None = None) -> Catalogue:
    files = catalogue_files(folder)
    if not files:
        raise CatalogueError("the rule catalogue is empty; reinstall ascend-migrate")
    try:
        texts = [(path, path.read_bytes()) for path in files]
    except OSError as exc:
        raise CatalogueError(f"{exc.filename}: cannot read the rule catalogue: {exc}") from None
    digest = hashlib.sha256()
    for _, data in texts:
        digest.update(data)
    cache_key = rule_cache.key(texts)
    if cache_key is not None and (kept := rule_cache.read(cache_key, Catalogue, digest.hexdigest()[:12])) is not None:
        return kept
    catalogue = _build(texts, digest.hexdigest()[:12])
    if cache_key is not None:
        rule_cache.write(cache_key, catalogue)
    return catalogue


def _build(texts: list[tuple[Path, bytes]], digest: str) -> Catalogue:
    """The catalogue built from its YAML files (path, bytes), every rule checked."""
    rules: dict[str, Rule] = {}
    owner: dict[str, str] = {}
    for path, data in texts:
        raw = load_raw(path, data)
        family = raw["family"]
        if family not in FAMILIES:
            raise CatalogueError(f"{path}: unknown family {family!r}")
        family_effort = _effort(raw.get("effort"), f"{path.name}: family effort", None, "family")
        for item in raw["rules"] or []:
            rule = _rule(item, family, path.name, family_effort)
            if rule.code in rules:
                raise CatalogueError(f"{path.name}: code {rule.code} is defined twice")
            for pattern, _ in rule.symbols:
                if pattern in owner:
                    raise CatalogueError(
                        f"{path.name}: symbol {pattern} belongs to both {owner[pattern]} and {rule.code}"
                    )
                owner[pattern] = rule.code
            rules[rule.code] = rule
    return Catalogue(dict(sorted(rules.items())), digest)


def rule_location(rule: Rule, folder: Path | None = None) -> tuple[Path, int]:
    """Where the rule is written: its catalogue file and the line of its `- code:` entry (0 if not found)."""
    path = (folder or data_dir("rules")) / rule.source
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return path, 0
    entry = re.compile(rf"^\s*-\s*code:\s*[\"']?{re.escape(rule.code)}[\"']?\s*(#.*)?$")
    return path, next((n for n, line in enumerate(lines, 1) if entry.match(line)), 0)
