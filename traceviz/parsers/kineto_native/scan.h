/* JSON scanning: whitespace, strings (UTF-8 checked, escapes decoded), numbers, literals, skipped values and keys; as strict as msgspec or stricter.
 * Part of traceviz/parsers/kineto_native.c, the one translation unit that includes it. */
#ifndef TRACEVIZ_KINETO_NATIVE_SCAN_H
#define TRACEVIZ_KINETO_NATIVE_SCAN_H

/* ---- scanning (validation as strict as msgspec's, or stricter) --------------------- */

#define WS(ch) ((ch) == ' ' || (ch) == '\t' || (ch) == '\n' || (ch) == '\r')

static inline const char *ws(const char *p, const char *end) {
    while (p < end && WS(*p)) p++;
    return p;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* bytes a string holds as they are: printable ASCII but the quote and the backslash */
static const unsigned char PLAIN[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

static inline int hexval(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int hex4(const char *p, const char *end, unsigned *out) {
    if (end - p < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval((unsigned char)p[i]);
        if (h < 0) return 0;
        v = (v << 4) | (unsigned)h;
    }
    *out = v;
    return 1;
}

/* length of the valid UTF-8 sequence at p (first byte >= 0x80), 0 if invalid */
static int utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    int n;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; min = 0x10000; }
    else return 0;
    if (end - p < n) return 0;
    unsigned cp = c & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

/* *pp at the opening quote; on success *pp past the closing one, *s and *e around the
   inside, *esc whether it holds escapes */
static int scan_string(const char **pp, const char *end, const char **s, const char **e,
                       int *esc) {
    const char *p = *pp + 1;
    *s = p;
    *esc = 0;
    while (p < end) {
        /* plain bytes one at a time, and from each 16-byte boundary on 8 at a time while
           none is a quote, a backslash, a control or non-ASCII byte (names run to
           hundreds of bytes); a false alarm only sends the bytes to the loop below */
        while (p < end && PLAIN[(unsigned char)*p]) {
            p++;
            if (((uintptr_t)p & 15) == 0) {
                while (end - p >= 8) {
                    uint64_t x, q, b;
                    memcpy(&x, p, 8);
                    q = x ^ (ONES * '"');
                    b = x ^ (ONES * '\\');
                    if ((((q - ONES) & ~q) | ((b - ONES) & ~b) | ((x - ONES * 0x20) & ~x) | x)
                        & HIGHS)
                        break;
                    p += 8;
                }
            }
        }
        if (p >= end) break;
        unsigned char ch = (unsigned char)*p;
        if (ch == '"') {
            *e = p;
            *pp = p + 1;
            return 1;
        }
        if (ch < 0x20) return 0;
        if (ch == '\\') {
            *esc = 1;
            if (end - p < 2) return 0;
            char x = p[1];
            if (x == 'u') {
                unsigned u;
                if (!hex4(p + 2, end, &u)) return 0;
                p += 6;
                if (u >= 0xDC00 && u <= 0xDFFF) return 0;  /* a low surrogate alone */
                if (u >= 0xD800 && u <= 0xDBFF) {  /* a high one: its low one must follow */
                    unsigned lo;
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &lo)
                        || lo < 0xDC00 || lo > 0xDFFF)
                        return 0;
                    p += 6;
                }
                continue;
            }
            if (x == '"' || x == '\\' || x == '/' || x == 'b' || x == 'f' || x == 'n'
                || x == 'r' || x == 't') {
                p += 2;
                continue;
            }
            return 0;
        }
        if (ch >= 0x80) {
            int n = utf8_len((const unsigned char *)p, (const unsigned char *)end);
            if (!n) return 0;
            p += n;
            continue;
        }
        p++;
    }
    return 0;
}

static void put_utf8(char **q, unsigned cp) {
    char *o = *q;
    if (cp < 0x80) *o++ = (char)cp;
    else if (cp < 0x800) {
        *o++ = (char)(0xC0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    *q = o;
}

/* decode a string scan_string accepted into out (at most e - s bytes: no escape is
   shorter than its UTF-8); returns the length */
static size_t unescape(const char *s, const char *e, char *out) {
    char *q = out;
    const char *p = s;
    while (p < e) {
        if (*p != '\\') { *q++ = *p++; continue; }
        char x = p[1];
        if (x == 'u') {
            unsigned u = 0, lo = 0xDC00;
            hex4(p + 2, e, &u);
            p += 6;
            if (u >= 0xD800 && u <= 0xDBFF) {
                hex4(p + 2, e, &lo);
                p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(&q, u);
            continue;
        }
        switch (x) {
            case 'b': *q++ = '\b'; break;
            case 'f': *q++ = '\f'; break;
            case 'n': *q++ = '\n'; break;
            case 'r': *q++ = '\r'; break;
            case 't': *q++ = '\t'; break;
            default: *q++ = x;  /* " \ / */
        }
        p += 2;
    }
    return (size_t)(q - out);
}

/* a JSON number at *pp; *is_int: no fraction or exponent */
static int scan_number(const char **pp, const char *end, int *is_int) {
    const char *p = *pp;
    *is_int = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) return 0;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') { while (p < end && *p >= '0' && *p <= '9') p++; }
    else return 0;
    if (p < end && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    /* a number runs into no letter or digit ("1x", "0123" is two numbers: malformed) */
    if (p < end && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z')
                    || (*p >= 'A' && *p <= 'Z') || *p == '.' || *p == '-' || *p == '+'))
        return 0;
    *pp = p;
    return 1;
}

/* an integer's text (scan_number said is_int) -> int64; 0 when it does not fit */
static int parse_int64(const char *s, const char *e, int64_t *out) {
    int neg = (*s == '-');
    if (neg) s++;
    uint64_t v = 0;
    for (; s < e; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return 0;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)v;
    }
    return 1;
}

static int literal(const char **pp, const char *end, const char *word, size_t n) {
    if ((size_t)(end - *pp) < n || memcmp(*pp, word, n) != 0) return 0;
    *pp += n;
    return 1;
}

/* skip (and check) any value; depth counts the containers around it */
static int skip_value(const char **pp, const char *end, int depth) {
    const char *p = *pp;
    if (p >= end) return 0;
    char ch = *p;
    if (ch == '"') {
        const char *s, *e;
        int esc;
        if (!scan_string(&p, end, &s, &e, &esc)) return 0;
    } else if (ch == '{' || ch == '[') {
        if (depth >= MAX_DEPTH) return 0;
        char close = ch == '{' ? '}' : ']';
        p = ws(p + 1, end);
        if (p < end && *p == close) { *pp = p + 1; return 1; }
        for (;;) {
            if (ch == '{') {
                const char *s, *e;
                int esc;
                if (p >= end || *p != '"' || !scan_string(&p, end, &s, &e, &esc)) return 0;
                p = ws(p, end);
                if (p >= end || *p != ':') return 0;
                p = ws(p + 1, end);
            }
            if (!skip_value(&p, end, depth + 1)) return 0;
            p = ws(p, end);
            if (p >= end) return 0;
            if (*p == ',') { p = ws(p + 1, end); continue; }
            if (*p == close) { p++; break; }
            return 0;
        }
    } else if (ch == 't') {
        if (!literal(&p, end, "true", 4)) return 0;
    } else if (ch == 'f') {
        if (!literal(&p, end, "false", 5)) return 0;
    } else if (ch == 'n') {
        if (!literal(&p, end, "null", 4)) return 0;
    } else {
        int is_int;
        if (!scan_number(&p, end, &is_int)) return 0;
    }
    *pp = p;
    return 1;
}

/* an object key at *pp (at its quote): *key and *klen its text, in place, or decoded into
   tmp (256 bytes) when it holds escapes ("n\u0061me" is "name"); a key too long for tmp
   is no field name: *klen = SIZE_MAX */
static int read_key(const char **pp, const char *end, char *tmp, const char **key,
                    size_t *klen) {
    const char *s, *e;
    int esc;
    if (*pp >= end || **pp != '"' || !scan_string(pp, end, &s, &e, &esc)) return 0;
    size_t raw = (size_t)(e - s);
    if (!esc) { *key = s; *klen = raw; return 1; }
    if (raw > 256) { *key = s; *klen = SIZE_MAX; return 1; }
    *key = tmp;
    *klen = unescape(s, e, tmp);
    return 1;
}


#endif  /* TRACEVIZ_KINETO_NATIVE_SCAN_H */
