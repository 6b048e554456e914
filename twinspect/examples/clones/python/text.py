"""Small text-processing utilities: CSV splitting, whitespace cleaning, word counts."""


def parse_csv_line(line, sep=","):
    """Split one CSV line into fields, honouring double-quoted fields and "" escapes."""
    fields = []
    current = []
    in_quotes = False
    i = 0
    while i < len(line):
        ch = line[i]
        if in_quotes:
            if ch == '"' and i + 1 < len(line) and line[i + 1] == '"':
                current.append('"')
                i += 1
            elif ch == '"':
                in_quotes = False
            else:
                current.append(ch)
        elif ch == '"':
            in_quotes = True
        elif ch == sep:
            fields.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    fields.append("".join(current))
    return fields


class TextCleaner:
    """Normalises whitespace in user input."""

    def __init__(self, collapse=True):
        self.collapse = collapse

    def clean(self, text):
        text = text.strip()
        if self.collapse:
            parts = text.split()
            text = " ".join(parts)
        return text.replace("\t", " ")

    def clean_lines(self, lines):
        """Clean every line and drop the ones that end up empty."""
        result = []
        for line in lines:
            cleaned = self.clean(line)
            if cleaned:
                result.append(cleaned)
        return result


def word_frequencies(text, stop_words=()):
    """Count words, ignoring case, punctuation and stop words."""

    def normalise(word):
        return word.lower().strip(".,;:!?\"'()")

    counts = {}
    for raw in text.split():
        word = normalise(raw)
        if word and word not in stop_words:
            counts[word] = counts.get(word, 0) + 1
    return counts
