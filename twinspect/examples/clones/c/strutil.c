/* strutil.c - small string helpers used by the configuration reader. */
#include <ctype.h>
#include <stddef.h>
#include <string.h>

/* Removes leading and trailing whitespace in place; returns s. */
char *str_trim(char *s)
{
    char *start = s;
    char *end;
    size_t len;

    while (*start && isspace((unsigned char)*start))
        start++;
    len = strlen(start);
    end = start + len;
    while (end > start && isspace((unsigned char)end[-1]))
        end--;
    *end = '\0';
    if (start != s)
        memmove(s, start, (size_t)(end - start) + 1);
    return s;
}

/* Splits line on sep into at most max fields, in place. Returns the field count. */
int split_fields(char *line, char sep, char **fields, int max)
{
    int count = 0;
    char *p = line;

    if (max <= 0)
        return 0;
    fields[count++] = p;
    while (*p) {
        if (*p == sep) {
            *p = '\0';
            if (count == max)
                break;
            fields[count++] = p + 1;
        }
        p++;
    }
    return count;
}

static int is_blank(const char *s)
{
    while (*s) { if (!isspace((unsigned char)*s)) return 0; s++; }
    return 1;
}
