"""The checker's visit of dotted names (`a.b.c`): the links of one whose root an import binds are reported or shown to
the attribute detectors in one walk, their names found by `NameResolution`'s key; one whose root no import binds is
shown to the detectors only (no link resolves). A mixin of `PythonChecker`, to keep that module readable."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from migrator.engine.name_resolution import NameResolution


class DottedNames(NameResolution):
    """`visit_Attribute` and its walks (the checker's set-up fills what they read)."""

    detect_attribute: tuple[Any, ...]
    attribute_names: frozenset[str] | None  # the attributes the detectors act on (None: every one)
    names_visited: set[str]
    facade: Any

    if TYPE_CHECKING:  # the checker's own (`PythonChecker`, `FastVisitor`)
        def _report(self, node: ast.AST, known: Any, decorator: bool) -> bool: ...
        def visit(self, node: ast.AST) -> Any: ...
        def generic_visit(self, node: ast.AST) -> Any: ...

    def visit_Attribute(self, node: ast.Attribute) -> None:
        root = node.value
        while type(root) is ast.Attribute:
            root = root.value
        if type(root) is ast.Name and root.id in self.alias_roots:
            self._bound_links(node, root)
            return
        if type(root) is ast.Name:  # `self.a.b`: no link resolves, the root's visit does nothing
            self._unbound_links(node)
            return
        if self.attribute_names is None or node.attr in self.attribute_names:
            for detect in self.detect_attribute:
                detect(self.facade, node)
        self.generic_visit(node)

    def _bound_links(self, node: ast.Attribute, root: ast.Name) -> None:
        """A dotted name whose root an import binds: its links outermost first, each reported (loads, and stores
        such as `cudnn.benchmark = True`: a link that reports ends the walk) or shown to the detectors as its own
        visit would, then the root; each link's names found by `_names`' key, without a walk of its own."""
        parts = [root.id]
        link: ast.expr = node
        while type(link) is ast.Attribute:
            parts.append(link.attr)
            link = link.value
        full = tuple(parts)
        head, depth, link = full[:1], 1, node
        while type(link) is ast.Attribute:
            key = head + full[depth:]  # `_names`' key of this link: the root, then its attributes outermost first
            names = self.chain_names.get(key)
            if names is None:
                names = self.chain_names[key] = frozenset(self._qualnames(link))
            if names and self._report(link, self._resolve(names), False):
                return
            if self.attribute_names is None or link.attr in self.attribute_names:
                for detect in self.detect_attribute:
                    detect(self.facade, link)
            link, depth = link.value, depth + 1
        if root.id in self.names_visited:
            self.visit(root)

    def _unbound_links(self, node: ast.Attribute) -> None:
        """A dotted name whose root no import binds: one loop over the links, each shown to the detectors as its own
        visit would, outermost first."""
        link: ast.expr = node
        while type(link) is ast.Attribute:
            if self.attribute_names is None or link.attr in self.attribute_names:
                for detect in self.detect_attribute:
                    detect(self.facade, link)
            link = link.value

