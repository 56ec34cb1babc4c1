#!/usr/bin/env bash
# Checks the links of README.md and the book (docs/src/**/*.md), offline:
# - a relative link must name a file or directory of the repository, resolved from the
#   directory of the Markdown file that holds it (links out of the book, such as
#   ../../deploy/bai.toml, are checked against the repository's tree the same way);
# - a `#anchor` (alone, or after a .md target) must be the id of a heading of that file,
#   by mdBook's rule: lowercase, whitespace to '-', every character but letters, digits,
#   '-' and '_' dropped, a repeated id numbered -1, -2…; a file's `{{#include FILE}}`
#   brings FILE's headings along;
# - every chapter under docs/src is listed in SUMMARY.md, and every SUMMARY entry exists;
# - http(s) and mailto links are not fetched (CI has no network) but must be well formed.
# Code blocks and inline code are not read. Prints each fault as FILE: LINK: why, exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import glob, os, re, sys
from urllib.parse import urlsplit

INLINE = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')
REFDEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$')
AUTO = re.compile(r'<((?:https?|mailto):[^>\s]*)>')
INCLUDE = re.compile(r'\{\{#include\s+([^\s}:]+)[^}]*\}\}')

def prose(path):
    """(line number, text) of a file's lines outside fenced code."""
    fence = None
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        m = re.match(r'\s*(```+|~~~+)', line)
        if m:
            mark = m.group(1)[0] * 3
            if fence is None:
                fence = mark
            elif fence == mark:
                fence = None
            continue
        if fence is None:
            yield n, line

def slug(text):
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', text)      # a link's text stays
    text = text.replace('`', '').replace('*', '')
    return ''.join('-' if c.isspace() else c.lower()
                   for c in text.strip() if c.isalnum() or c in '-_' or c.isspace())

def anchors(path, seen=()):
    ids, count = set(), {}
    for n, line in prose(path):
        inc = INCLUDE.search(line)
        if inc and path not in seen:
            ids |= anchors(os.path.normpath(os.path.join(os.path.dirname(path), inc.group(1))),
                           seen + (path,))
        m = re.match(r'\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$', line)
        if m:
            base = slug(m.group(2))
            k = count.get(base, 0)
            count[base] = k + 1
            ids.add(base if k == 0 else f'{base}-{k}')
    return ids

errors = []
def fault(path, n, link, why):
    errors.append(f'{path}:{n}: {link}: {why}')

def check_link(path, n, link):
    if not link:
        return fault(path, n, '()', 'empty link')
    parts = urlsplit(link)
    if parts.scheme in ('http', 'https'):
        if not parts.netloc or re.search(r'[\s<>"]', link):
            fault(path, n, link, 'malformed URL')
        return
    if parts.scheme == 'mailto':
        if '@' not in parts.path:
            fault(path, n, link, 'malformed mailto')
        return
    if parts.scheme or parts.netloc:
        return fault(path, n, link, 'unknown scheme (only http, https, mailto or a relative path)')
    target = path if not parts.path else os.path.normpath(
        os.path.join(os.path.dirname(path), parts.path))
    if parts.path.startswith('/'):
        return fault(path, n, link, 'absolute path: write it relative to this file')
    if not os.path.exists(target):
        return fault(path, n, link, f'no such file ({target})')
    if parts.fragment:
        if not target.endswith('.md'):
            fault(path, n, link, 'an anchor into a file that is not Markdown')
        elif parts.fragment not in anchors(target):
            fault(path, n, link, f'no heading with this anchor in {target}')

def blocks(path):
    """(first line number, text) of each paragraph: a link's text may span lines."""
    start, lines, last = None, [], None
    for n, line in prose(path):
        if line.strip() and last == n - 1 and lines:
            lines.append(line)
        else:
            if lines:
                yield start, ''.join(lines)
            start, lines = n, ([line] if line.strip() else [])
        last = n
    if lines:
        yield start, ''.join(lines)

CODE = re.compile(r'(`+)(?:(?!\1).)+?\1', re.S)
def no_code(text):
    """Inline code removed, its line breaks kept (line numbers stay right)."""
    return CODE.sub(lambda m: '\n' * m.group(0).count('\n'), text)

files = ['README.md'] + sorted(glob.glob('docs/src/**/*.md', recursive=True))
for path in files:
    for start, text in blocks(path):
        text = no_code(text)
        at = lambda i: start + text.count('\n', 0, i)
        for m in INLINE.finditer(text):
            check_link(path, at(m.start()), m.group(1))
        for i, line in enumerate(INLINE.sub(lambda m: '\n' * m.group(0).count('\n'), text).split('\n')):
            if '](' in line:
                fault(path, start + i, line.strip()[:60], 'a link Markdown does not read (a space in it?)')
        for i, line in enumerate(text.split('\n')):
            m = REFDEF.match(line)
            if m:
                check_link(path, start + i, m.group(1))
        for m in AUTO.finditer(text):
            check_link(path, at(m.start()), m.group(1))

summary = 'docs/src/SUMMARY.md'
if not os.path.exists(summary):
    errors.append(f'{summary}: missing')
else:
    listed = set()
    for n, line in prose(summary):
        for m in INLINE.finditer(no_code(line)):
            target = os.path.normpath(os.path.join('docs/src', m.group(1).split('#')[0]))
            listed.add(target)
    for path in files[1:]:
        if path != summary and os.path.normpath(path) not in listed:
            errors.append(f'{path}: a chapter SUMMARY.md does not list')

for e in errors:
    print(e, file=sys.stderr)
if errors:
    sys.exit(f'check-docs: {len(errors)} broken link(s) or chapter(s)')
print(f'check-docs: {len(files)} files, every link and chapter in place')
PY
