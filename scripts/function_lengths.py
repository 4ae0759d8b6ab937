#!/usr/bin/env python3
"""Lists the C++ functions longer than a limit: `function_lengths.py LIMIT FILE...`.

A function is a '{' whose statement holds a parameter list and is no control statement, type,
namespace, initializer or lambda; its length runs from that line to its matching '}' (lambdas
and local classes inside it count as its lines). Comments and string literals are read past.
Prints "LINES FILE:LINE SIGNATURE" for each one over LIMIT and exits 1 if there is one.
tests/layers_test.sh holds product code to issue 47's 120 lines."""
import re
import sys

NOT_A_FUNCTION = re.compile(
    r'^\s*(if|for|while|switch|else|do|try|catch|namespace|struct|class|enum|union|extern|'
    r'return)\b')


def code_only(text):
    """`text` with comments and string and character literals emptied, its newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * text.count('\n', i, j))
            i = j
        elif text.startswith('R"', i) and (m := re.match(r'R"([^(]*)\(', text[i:])):
            end = ')' + m.group(1) + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append('""' + '\n' * text.count('\n', i, j))
            i = j
        elif text[i] == "'" and 0 < i < n - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
            i += 1  # a digit separator (1'000'000), no character literal
        elif text[i] in '"\'':
            quote, j = text[i], i + 1
            while j < n and text[j] != quote and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(quote * 2 + '\n' * text.count('\n', i, j))
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return ''.join(out)


def functions(path):
    """(lines, first line, signature) of each outermost function defined in `path`."""
    with open(path, encoding='utf-8', errors='replace') as f:
        text = code_only(f.read())
    found, statement, open_braces = [], 0, []
    for i, c in enumerate(text):
        if c == '{':
            head = text[statement:i]
            is_function = ('(' in head and ')' in head and not NOT_A_FUNCTION.match(head)
                           and not re.search(r'=\s*$', head.strip())
                           and not re.search(r'\[[^\]]*\]\s*(\(|$)', head)
                           and not head.strip().endswith(','))
            inside_one = any(f for _, f, _ in open_braces)
            open_braces.append((i, is_function and not inside_one, head))
            statement = i + 1
        elif c == '}':
            if open_braces:
                start, is_function, head = open_braces.pop()
                if is_function:
                    first = text.count('\n', 0, start) + 1
                    last = text.count('\n', 0, i) + 1
                    found.append((last - first + 1, first, ' '.join(head.split())[:100]))
            statement = i + 1
        elif c == ';':
            statement = i + 1
    return found


def main(argv):
    limit = int(argv[1])
    over = [(n, p, line, sig) for p in argv[2:] for n, line, sig in functions(p) if n > limit]
    for n, p, line, sig in sorted(over, reverse=True):
        print(f'{n:5d} {p}:{line} {sig}')
    return 1 if over else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
