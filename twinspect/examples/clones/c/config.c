/*
 * config.c - reads "key = value" lines. Helpers were copied from strutil.c
 * so that this file can be compiled on its own.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

char *str_trim(char *s)
{
    char *start = s;   // first non-blank character
    char *end;
    size_t len;

    while (*start && isspace((unsigned char) *start)) start++;
    len = strlen(start);
    end = start + len;
    /* walk back over trailing blanks */
    while (end > start && isspace((unsigned char) end[-1])) end--;
    *end = '\0';
    if (start != s) memmove(s, start, (size_t) (end - start) + 1);
    return s;
}

int tokenize(char *text, char delim, char **out, int limit)
{
    int n = 0;
    char *cur = text;

    if (limit <= 0)
        return 0;
    out[n++] = cur;
    while (*cur) {
        if (*cur == delim) {
            *cur = '\0';
            if (n == limit)
                break;
            out[n++] = cur + 1;
        }
        cur++;
    }
    return n;
}

/* Copies src without surrounding whitespace into dst (capacity cap); returns the length. */
size_t trim_copy(char *dst, size_t cap, const char *src)
{
    const char *start = src;
    const char *end;
    size_t len;

    if (cap == 0)
        return 0;
    while (*start && isspace((unsigned char)*start))
        start++;
    end = start + strlen(start);
    while (end > start && isspace((unsigned char)end[-1]))
        end--;
    len = (size_t)(end - start);
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, start, len);
    dst[len] = '\0';
    return len;
}

/* Parses a decimal int; returns 0 on success, -1 on overflow or trailing garbage. */
int parse_int(const char *text, int *value)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno == ERANGE || v > INT_MAX || v < INT_MIN)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (end == text || *end != '\0')
        return -1;
    *value = (int)v;
    return 0;
}
