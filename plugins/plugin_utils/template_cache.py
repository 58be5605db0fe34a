"""Compiled Jinja templates kept between runs instead of compiled in every worker.

ansible-core 2.19 compiles a template or expression each time it renders one
and keeps nothing: every ``when:`` of every task, and every variable that is
itself a template, is parsed, turned into Python source and compiled again in
each worker process, which Ansible forks per task and host. On a no-op deploy
of the default virtual cluster that is about 1,560 compilations and 2.8 s of
the workers' CPU, the largest single cost of a skipped task (bench/RESULTS.md).

``install`` makes Ansible's Jinja environment keep the code object of each
compilation in a directory that outlives the run, one file per template, and
load it from there the next time, in this run (another worker) or a later one.
A file is named by a hash of everything the compiled code depends on besides
the directory's fingerprint: the source, whether Ansible escapes backslashes
in it (expressions of conditionals do not), and the lexer settings a
``#jinja2:`` header may override. The directory is named by a fingerprint of
ansible-core, Jinja, Python and every collection's filter and test plugins,
since Jinja bakes in at compile time how a filter or test is called.

Every compilation from source is kept, except where Ansible debugs template
sources (it writes the generated source out). Where the internals are not as
expected, nothing is changed and Ansible compiles as it always does.
"""

from __future__ import annotations

import contextvars
import hashlib
import marshal
import os
from collections.abc import Iterable
from pathlib import Path
from types import CodeType
from typing import Any

from ansible_collections.deepops.cluster.plugins.plugin_utils import kept_caches

__all__ = ["DEFAULT_CACHE_DIR", "fingerprint", "install"]

DEFAULT_CACHE_DIR = kept_caches.CACHE_ROOT / "templates"
# A directory is started again beyond this many entries: templates of roles
# since edited pile up otherwise (a no-op deploy of the default cluster keeps about 450).
MAX_ENTRIES = 20_000
_SUFFIX = ".code"


def fingerprint(collection_paths: Iterable[str], settings: Iterable[str]) -> str:
    """A name for everything compiled code depends on besides its source.

    SETTINGS: the versions of ansible-core and Jinja and the settings that
    change how Ansible parses or compiles (Jinja extensions, embedded templates).
    """
    return kept_caches.fingerprint(collection_paths, settings, ("filter", "test"))


class _Store:
    """Code objects by key: this process's own, then the directory's files."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.loaded: dict[str, CodeType] = {}

    def get(self, key: str) -> CodeType | None:
        code = self.loaded.get(key)
        if code is not None:
            return code
        try:
            code = marshal.loads((self.directory / f"{key}{_SUFFIX}").read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            return None  # absent or unreadable: compiled again and written anew
        if not isinstance(code, CodeType):
            return None
        self.loaded[key] = code
        return code

    def put(self, key: str, code: CodeType) -> None:
        self.loaded[key] = code
        try:
            kept_caches.write_atomically(self.directory / f"{key}{_SUFFIX}", marshal.dumps(code))
        except (OSError, ValueError):
            pass  # kept for this process only


def _start_again_if_full(directory: Path) -> None:
    entries = os.listdir(directory)
    if len(entries) > MAX_ENTRIES:
        for name in entries:
            (directory / name).unlink(missing_ok=True)


def _internals() -> Any:
    """Ansible's Jinja module, where it has every name this hook uses; else None."""
    try:
        from ansible._internal._templating import _jinja_bits
    except ImportError:
        return None
    environment = getattr(_jinja_bits, "AnsibleEnvironment", None)
    needed = [getattr(_jinja_bits, name, None) for name in ("_TemplateCompileContext", "_TEMPLATE_OVERRIDE_FIELD_NAMES")]
    if environment is None or None in needed or not hasattr(environment, "_debuggable_template_source"):
        return None
    if not all(callable(getattr(environment, name, None)) for name in ("compile", "compile_expression", "make_globals")):
        return None
    return _jinja_bits


def install(cache_dir: Path, key: str) -> Path | None:
    """Keep compiled templates in CACHE_DIR/KEY; the directory used, or None where Ansible is left as it is."""
    jinja_bits = _internals()
    if jinja_bits is None:
        return None
    environment_class = jinja_bits.AnsibleEnvironment
    if getattr(environment_class.compile, "deepops_store", None) is not None:
        return environment_class.compile.deepops_store.directory  # installed earlier in this process
    directory = kept_caches.kept_directory(cache_dir, key)
    _start_again_if_full(directory)
    _patch(jinja_bits, _Store(directory))
    return directory


def _patch(jinja_bits: Any, store: _Store) -> None:
    from jinja2 import nodes
    from jinja2.environment import TemplateExpression

    environment_class = jinja_bits.AnsibleEnvironment
    compile_code = environment_class.compile
    compile_expression = environment_class.compile_expression
    # The key of the expression whose parsed tree compile_expression hands to compile.
    expression_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("deepops_expression_key", default=None)

    def key_of(environment: Any, kind: str, source: str, options: tuple) -> str:
        compiling = jinja_bits._TemplateCompileContext.current(optional=True)
        escapes = None if compiling is None else compiling.escape_backslashes
        lexer = tuple(getattr(environment, name) for name in jinja_bits._TEMPLATE_OVERRIDE_FIELD_NAMES)
        # str(): the source may carry Ansible's data tags, which the compiled code does not.
        return hashlib.sha256(repr((kind, str(source), options, escapes, lexer)).encode()).hexdigest()

    def compile(self, source, name=None, filename=None, raw=False, defer_init=False):  # noqa: A001 (Jinja's name)
        if raw or self._debuggable_template_source:
            key = None
        elif isinstance(source, str):
            key = key_of(self, "template", source, (name, filename, defer_init))
        elif isinstance(source, nodes.Template):
            key = expression_key.get()
        else:
            key = None
        if key is None:
            return compile_code(self, source, name, filename, raw, defer_init)
        code = store.get(key)
        if code is None:
            code = compile_code(self, source, name, filename, raw, defer_init)
            store.put(key, code)
        return code

    def compile_expression_kept(self, source, undefined_to_none=True):
        if self._debuggable_template_source:
            return compile_expression(self, source, undefined_to_none)
        key = key_of(self, "expression", source, (bool(undefined_to_none),))
        code = store.get(key)
        if code is not None:
            # What Jinja's compile_expression builds from the compiled tree, without parsing it again.
            template = self.template_class.from_code(self, code, self.make_globals(None), None)
            return TemplateExpression(template, undefined_to_none)
        token = expression_key.set(key)
        try:
            return compile_expression(self, source, undefined_to_none)
        finally:
            expression_key.reset(token)

    compile.deepops_store = store
    environment_class.compile = compile
    environment_class.compile_expression = compile_expression_kept
