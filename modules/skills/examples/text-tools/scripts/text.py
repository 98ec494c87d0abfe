"""Text utilities for the text-tools sample skill.

Arguments are read by position from sys.argv, never parsed as options, so a
text such as "--help" is just text. Output is one JSON object on stdout.
"""

import collections
import json
import sys


def count(text, top):
    words = text.split()
    frequent = collections.Counter(w.lower() for w in words).most_common(max(0, min(top, 100)))
    return {
        "words": len(words),
        "lines": len(text.splitlines()),
        "characters": len(text),
        "most_frequent": [{"word": w, "count": c} for w, c in frequent],
    }


def transform(mode, text):
    results = {"upper": text.upper(), "lower": text.lower(), "title": text.title(), "reverse": text[::-1]}
    return {"mode": mode, "text": results[mode]}


def main(argv):
    if len(argv) >= 2 and argv[0] == "count":
        top = int(argv[3]) if len(argv) >= 4 and argv[2] == "--top" else 0
        return count(argv[1], top)
    if len(argv) == 3 and argv[0] == "transform" and argv[1] in ("upper", "lower", "title", "reverse"):
        return transform(argv[1], argv[2])
    sys.exit("usage: text.py count TEXT [--top N] | text.py transform upper|lower|title|reverse TEXT")


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), ensure_ascii=False))
