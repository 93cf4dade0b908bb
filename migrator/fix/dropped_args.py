"""Close the gap a fix leaves when it drops a call's argument (KERN018's `num_warps=`), losing no comment.

libcst hangs the layout *after* an argument on its comma: the comment that trails it, the own-line comments
before the next argument and the indentation of that next argument (or of the `)`). Dropping the argument drops
all of it. Without a comment in a dropped argument the old layout rules stand unchanged (byte for byte); with
one, each comment stays where the argument was: its trailing comment on its own line at the arguments'
indentation (inline, if the argument shared its line with the one before), the other comments as they were.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.fix.import_removal import comments_in

if TYPE_CHECKING:
    import libcst as cst

    Whitespace = cst.BaseParenthesizableWhitespace


def rejoin_arguments(original: cst.Call, updated: cst.Call, dropped: set[int]) -> cst.Call:
    """`updated` (the call less the arguments whose original ids are in `dropped`), its layout closed up."""
    if len(updated.args) == len(original.args):
        return updated
    if not any(comments_in(a) for a in original.args if id(a) in dropped):
        return _last_comma_kept(original, updated) if updated.args else updated
    return _comments_kept(original, updated, dropped)


def _last_comma_kept(original: cst.Call, updated: cst.Call) -> cst.Call:
    """No comment dropped: the last argument dropped leaves its comma (or none) and the layout before `)`."""
    import libcst as cst

    last, kept = original.args[-1].comma, updated.args[-1].comma
    if isinstance(last, cst.Comma) and isinstance(kept, cst.Comma) and kept.deep_equals(last):
        return updated
    comma = _comma_keeping_comments(kept, last)
    return updated.with_changes(args=[*updated.args[:-1], updated.args[-1].with_changes(comma=comma)])


def _comma_keeping_comments(kept: cst.Comma | cst.MaybeSentinel, last: cst.Comma | cst.MaybeSentinel) -> cst.Comma | cst.MaybeSentinel:
    """The dropped last argument's comma (its layout before `)`), holding the comments that the new last
    argument's own comma held (`B=B,  # constants` keeps its comment)."""
    import libcst as cst

    held = kept.whitespace_after if isinstance(kept, cst.Comma) else None
    if not isinstance(held, cst.ParenthesizedWhitespace) or (
            held.first_line.comment is None and not any(line.comment for line in held.empty_lines)):
        return last
    after = last.whitespace_after if isinstance(last, cst.Comma) else None
    if not isinstance(last, cst.Comma) or not isinstance(after, cst.ParenthesizedWhitespace):
        return kept  # no layout to take over: the comma stays with its comments
    return last.with_changes(whitespace_after=after.with_changes(
        first_line=held.first_line, empty_lines=[*held.empty_lines, *after.empty_lines]))


def _comments_kept(original: cst.Call, updated: cst.Call, dropped: set[int]) -> cst.Call:
    """Each dropped argument's gap (the layout after the element before it: a kept argument's comma or the
    `(`) merged with the layout after the dropped one and its comments."""
    import libcst as cst

    args, before_args = list(updated.args), updated.whitespace_before_args
    kept = -1  # index in `args` of the last kept argument so far
    for at, arg in enumerate(original.args):
        if id(arg) not in dropped:
            kept += 1
            continue
        comments = comments_in(arg)
        if not comments and not all(id(a) in dropped for a in original.args[at:]):
            continue  # a comment-free argument in the middle: the gap before it stays, as before
        after = arg.comma.whitespace_after if isinstance(arg.comma, cst.Comma) else arg.whitespace_after_arg
        own = [c for c in comments if not _trails(after, c)]  # the comment after it moves with `after`
        if kept < 0:
            before_args = _merged(before_args, own, after)
            continue
        comma = args[kept].comma  # a Comma: an argument followed it
        if isinstance(comma, cst.Comma):
            args[kept] = args[kept].with_changes(comma=comma.with_changes(
                whitespace_after=_merged(comma.whitespace_after, own, after)))
    last = args[-1] if args else None
    if (last is not None and isinstance(last.comma, cst.Comma) and not isinstance(original.args[-1].comma, cst.Comma)
            and not comments_in(last.whitespace_after_arg) and not comments_in(last.comma.whitespace_before)):
        # the call had no trailing comma: none is added, the layout moves before `)`
        args[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=last.comma.whitespace_after)
    return updated.with_changes(args=args, whitespace_before_args=before_args)


def _trails(after: Whitespace, comment: cst.Comment) -> bool:
    """Whether `comment` is in the layout after the dropped argument (its trailing comment or a later line)."""
    import libcst as cst

    if not isinstance(after, cst.ParenthesizedWhitespace):
        return False
    return after.first_line.comment is comment or any(line.comment is comment for line in after.empty_lines)


def _merged(before: Whitespace, own: list[cst.Comment], after: Whitespace) -> Whitespace:
    """The layout that replaces `before` + dropped argument + `after`: `before`'s first line, its comment
    lines, the argument's own comments and trailing comment as own lines, then `after`'s lines and indent."""
    import libcst as cst

    pw = cst.ParenthesizedWhitespace
    if isinstance(after, pw):
        trailing = [after.first_line.comment] if after.first_line.comment is not None else []
        if isinstance(before, pw):  # the argument on its own line: its comments on theirs, at its indentation
            lines = [*before.empty_lines, *_own_lines([*own, *trailing], before), *after.empty_lines]
            return after.with_changes(first_line=before.first_line, empty_lines=lines)
        # the argument shared its line with the element before: its trailing comment stays on that line
        return after.with_changes(empty_lines=[*_own_lines(own, after), *after.empty_lines])
    if isinstance(before, pw):  # the next element (or `)`) followed on the argument's line
        return before.with_changes(empty_lines=[*before.empty_lines, *_own_lines(own, before)])
    if not own:
        return after
    lines = _own_lines(own, None)  # a comment inside an argument on one line: the next one goes below it
    return pw(empty_lines=lines, indent=lines[0].indent, last_line=lines[0].whitespace)


def _own_lines(comments: list[cst.Comment], indented_as: cst.ParenthesizedWhitespace | None) -> list[cst.EmptyLine]:
    """Each comment on a line of its own, indented as the line `indented_as` begins (the block's, if None)."""
    import libcst as cst

    indent = indented_as.indent if indented_as is not None else True
    whitespace = indented_as.last_line if indented_as is not None else cst.SimpleWhitespace("    ")
    return [cst.EmptyLine(indent=indent, whitespace=whitespace, comment=c) for c in comments]
