/* traceviz.parsers._kineto_native: a compiled reader of Kineto event arrays.
 *
 * It reads the same bytes the Python reader (msgspec, kineto/events.py) decodes, straight
 * into growing column buffers: no Python object per event. Whatever it does not replicate
 * exactly (invalid JSON, a field of the wrong type, a lone surrogate, invalid UTF-8, deep
 * nesting, an input of 2 GiB or more) makes it answer None, "not mine": the Python reader
 * then decodes the piece, so its result and its error are the oracle's by construction.
 *
 * Python API (stable; see traceviz/parsers/_kineto_native.pyi):
 *
 *   read_events(data, document=False) -> dict | None
 *
 *   data: a bytes-like object (buffer protocol, C-contiguous).
 *   document=False: data is the inside of the event array (elements separated by commas,
 *     no brackets), the bytes the Python reader wraps in "[" "]".
 *   document=True: data is a whole JSON document, an object whose "traceEvents" key holds
 *     the event array; None when it has no (or more than one) such key.
 *   The dict holds "n" (the number of events) and, per column, read-only buffer objects
 *   (buffer protocol, owned by the result; wrap them without copying):
 *     "ph", "cat", "name": (offsets int32[n+1], utf-8 data, validity bitmap) - an Arrow
 *        string array; null where the field is absent or null.
 *     "ts", "dur" and the raw args "grid", "block", "registers per thread",
 *        "shared memory", "Input type", "Concrete Inputs", "Input Dims",
 *        "In msg nelems", "Out msg nelems", "dtype", "Group size",
 *        "Process Group Name", "Collective name": (offsets int32[n+1], data) - an Arrow
 *        binary array of each value's raw JSON text; empty where absent.
 *     "pid", "tid" and the args "correlation", "device", "stream", "bytes", "Bytes",
 *        "Total Allocated", "Device Id": (values int64[n], tags uint8[n]); tag 0: absent
 *        or null, 1: an integer that fits int64 (in values), 2: anything else (a float,
 *        a string, true/false, a bigger integer), listed in "odd".
 *     "odd": int64[4*k]: per odd value (row, field, start, end): the field's position in
 *        INT_FIELDS ("pid", "tid", then the args' in the order above) and the value's
 *        raw JSON text as data[start:end].
 *     "meta" (document=True only): {key: (start, end)} for the document keys
 *        deviceProperties, schemaVersion, distributedInfo, baseTimeNanoseconds and
 *        traceName (the last one of a repeated key, as msgspec keeps).
 *   As msgspec: the last of a repeated field wins ("args" as a whole), unknown fields are
 *   skipped (but checked), "args": null reads as no args. A repeated number field (or
 *   "args") whose earlier value is not a plain integer is not mine: msgspec checks every
 *   occurrence, and such a value is checked on the Python side.
 *
 * The GIL is released while parsing; every state lives in the call's own context, so
 * calls may run at once in several threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 48  /* nesting inside one event; deeper: not mine */

/* ---- growing buffers ---------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_grow(Buf *b, size_t extra) {
    if (extra > SIZE_MAX / 2 - b->len) return 0;
    size_t need = b->len + extra;
    if (need <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) return 0;
    b->p = q;
    b->cap = cap;
    return 1;
}

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (b->cap - b->len < n && !buf_grow(b, n)) return 0;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    return 1;
}

/* ---- columns ------------------------------------------------------------------------ */

enum { S_PH, S_CAT, S_NAME, N_STR };
enum {
    R_TS, R_DUR, R_GRID, R_BLOCK, R_REGS, R_SHM, R_INPUT_TYPE, R_CONCRETE, R_INPUT_DIMS,
    R_IN_NELEMS, R_OUT_NELEMS, R_DTYPE, R_GROUP, R_PG, R_COLL, N_RAW
};
enum {
    I_PID, I_TID, I_CORRELATION, I_DEVICE, I_STREAM, I_BYTES, I_MEM_BYTES, I_MEM_TOTAL,
    I_MEM_DEVICE, N_INT
};
enum { M_DEVPROPS, M_SCHEMA, M_DIST, M_BASETIME, M_TRACENAME, N_META };

/* field names with their lengths (a key is matched by length, then bytes) */
typedef struct {
    const char *s;
    size_t n;
} Name;
#define NAME(text) {text, sizeof(text) - 1}

static const Name STR_NAMES[N_STR] = {NAME("ph"), NAME("cat"), NAME("name")};
static const Name RAW_NAMES[N_RAW] = {
    NAME("ts"), NAME("dur"), NAME("grid"), NAME("block"), NAME("registers per thread"),
    NAME("shared memory"), NAME("Input type"), NAME("Concrete Inputs"), NAME("Input Dims"),
    NAME("In msg nelems"), NAME("Out msg nelems"), NAME("dtype"), NAME("Group size"),
    NAME("Process Group Name"), NAME("Collective name")};
static const Name INT_NAMES[N_INT] = {
    NAME("pid"), NAME("tid"), NAME("correlation"), NAME("device"), NAME("stream"),
    NAME("bytes"), NAME("Bytes"), NAME("Total Allocated"), NAME("Device Id")};
static const Name META_NAMES[N_META] = {
    NAME("deviceProperties"), NAME("schemaVersion"), NAME("distributedInfo"),
    NAME("baseTimeNanoseconds"), NAME("traceName")};

/* one field's value in the event being read: where its text is and what it is */
typedef struct {
    const char *s, *e;  /* the value's raw text (a string: inside its quotes) */
    int kind;           /* 0 absent, 1 null, 2 string (escaped if 3), 4 int64, 5 odd */
    int64_t v;
} Slot;

typedef struct {
    Buf str_off[N_STR], str_data[N_STR], str_valid[N_STR];
    Buf raw_off[N_RAW], raw_data[N_RAW];
    Buf int_val[N_INT], int_tag[N_INT];
    Buf odd;
    size_t n, cap_rows;
    const char *base;
    Slot str[N_STR], raw[N_RAW], num[N_INT];
    const char *meta_s[N_META], *meta_e[N_META];
    int nomem;
} Ctx;

static void ctx_free(Ctx *c) {
    for (int i = 0; i < N_STR; i++) {
        free(c->str_off[i].p); free(c->str_data[i].p); free(c->str_valid[i].p);
    }
    for (int i = 0; i < N_RAW; i++) { free(c->raw_off[i].p); free(c->raw_data[i].p); }
    for (int i = 0; i < N_INT; i++) { free(c->int_val[i].p); free(c->int_tag[i].p); }
    free(c->odd.p);
}

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

/* the fields of an event and of its args, by key: a switch on the length, then a compare
   of constant length (inlined); 0-99: a number field (INT_NAMES), 100 + i: RAW_NAMES[i],
   200 + i: STR_NAMES[i], 300: args, -1: another key */
#define IS(lit) (memcmp(k, lit, sizeof(lit) - 1) == 0)

static int event_field(const char *k, size_t n) {
    switch (n) {
        case 2:
            if (IS("ph")) return 200 + S_PH;
            if (IS("ts")) return 100 + R_TS;
            break;
        case 3:
            if (IS("cat")) return 200 + S_CAT;
            if (IS("pid")) return I_PID;
            if (IS("tid")) return I_TID;
            if (IS("dur")) return 100 + R_DUR;
            break;
        case 4:
            if (IS("name")) return 200 + S_NAME;
            if (IS("args")) return 300;
            break;
    }
    return -1;
}

static int args_field(const char *k, size_t n) {
    switch (n) {
        case 4: if (IS("grid")) return 100 + R_GRID; break;
        case 5:
            if (IS("block")) return 100 + R_BLOCK;
            if (IS("bytes")) return I_BYTES;
            if (IS("dtype")) return 100 + R_DTYPE;
            if (IS("Bytes")) return I_MEM_BYTES;
            break;
        case 6:
            if (IS("device")) return I_DEVICE;
            if (IS("stream")) return I_STREAM;
            break;
        case 9: if (IS("Device Id")) return I_MEM_DEVICE; break;
        case 10:
            if (IS("Input type")) return 100 + R_INPUT_TYPE;
            if (IS("Input Dims")) return 100 + R_INPUT_DIMS;
            if (IS("Group size")) return 100 + R_GROUP;
            break;
        case 11: if (IS("correlation")) return I_CORRELATION; break;
        case 13:
            if (IS("shared memory")) return 100 + R_SHM;
            if (IS("In msg nelems")) return 100 + R_IN_NELEMS;
            break;
        case 14: if (IS("Out msg nelems")) return 100 + R_OUT_NELEMS; break;
        case 15:
            if (IS("Concrete Inputs")) return 100 + R_CONCRETE;
            if (IS("Collective name")) return 100 + R_COLL;
            if (IS("Total Allocated")) return I_MEM_TOTAL;
            break;
        case 18: if (IS("Process Group Name")) return 100 + R_PG; break;
        case 20: if (IS("registers per thread")) return 100 + R_REGS; break;
    }
    return -1;
}

static int find(const char *key, size_t klen, const Name *names, int n) {
    for (int i = 0; i < n; i++) {
        if (names[i].n != klen) continue;
        size_t j = 0;
        while (j < klen && names[i].s[j] == key[j]) j++;
        if (j == klen) return i;
    }
    return -1;
}

/* ---- one event ------------------------------------------------------------------------ */

/* a str | None field */
static int read_str(const char **pp, const char *end, Slot *sl) {
    const char *p = *pp;
    if (p < end && *p == '"') {
        int esc;
        if (!scan_string(&p, end, &sl->s, &sl->e, &esc)) return 0;
        sl->kind = esc ? 3 : 2;
    } else if (literal(&p, end, "null", 4)) {
        sl->kind = 1;
    } else {
        return 0;  /* another type: msgspec's ValidationError */
    }
    *pp = p;
    return 1;
}

/* an int | float | str | bool | None field */
static int read_num(const char **pp, const char *end, Slot *sl) {
    const char *p = *pp;
    /* a repeated field whose earlier value was set aside for the Python side's check
       (msgspec checks every occurrence, then keeps the last): not mine */
    if (sl->kind == 5) return 0;
    if (p >= end) return 0;
    char ch = *p;
    sl->s = p;
    if (ch == '"') {
        const char *s, *e;
        int esc;
        if (!scan_string(&p, end, &s, &e, &esc)) return 0;
        sl->kind = 5;
    } else if (ch == 'n') {
        if (!literal(&p, end, "null", 4)) return 0;
        sl->kind = 1;
    } else if (ch == 't' || ch == 'f') {
        if (!(ch == 't' ? literal(&p, end, "true", 4) : literal(&p, end, "false", 5)))
            return 0;
        sl->kind = 5;
    } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
        int is_int;
        if (!scan_number(&p, end, &is_int)) return 0;
        sl->kind = (is_int && parse_int64(sl->s, p, &sl->v)) ? 4 : 5;
    } else {
        return 0;  /* an object or array: msgspec's ValidationError */
    }
    sl->e = p;
    *pp = p;
    return 1;
}

/* a msgspec.Raw field: any value, its text kept */
static int read_raw(const char **pp, const char *end, Slot *sl, int depth) {
    sl->s = *pp;
    if (!skip_value(pp, end, depth)) return 0;
    sl->e = *pp;
    sl->kind = 2;
    return 1;
}

static int read_args(const char **pp, const char *end, Ctx *c) {
    const char *p = *pp;
    /* a repeated "args" would drop an earlier value set aside for the Python side's
       check (msgspec checks every occurrence): not mine */
    for (int i = I_CORRELATION; i < N_INT; i++)
        if (c->num[i].kind == 5) return 0;
    for (int i = 0; i < N_INT; i++)
        if (i >= I_CORRELATION) c->num[i].kind = 0;
    for (int i = R_GRID; i < N_RAW; i++) c->raw[i].kind = 0;
    if (literal(&p, end, "null", 4)) { *pp = p; return 1; }
    if (p >= end || *p != '{') return 0;
    p = ws(p + 1, end);
    if (p < end && *p == '}') { *pp = p + 1; return 1; }
    char tmp[256];
    const char *key;
    for (;;) {
        size_t klen;
        if (!read_key(&p, end, tmp, &key, &klen)) return 0;
        p = ws(p, end);
        if (p >= end || *p != ':') return 0;
        p = ws(p + 1, end);
        int f = args_field(key, klen);
        if (f >= 100) {
            if (!read_raw(&p, end, &c->raw[f - 100], 2)) return 0;
        } else if (f >= 0) {
            if (!read_num(&p, end, &c->num[f])) return 0;
        } else if (!skip_value(&p, end, 2)) {
            return 0;
        }
        p = ws(p, end);
        if (p >= end) return 0;
        if (*p == ',') { p = ws(p + 1, end); continue; }
        if (*p == '}') { p++; break; }
        return 0;
    }
    *pp = p;
    return 1;
}

/* room for `rows` rows in every fixed-width column (offsets, values, tags, validity),
   grown together by doubling: a row's writes then check nothing */
static int ensure_rows(Ctx *c, size_t rows) {
    if (rows <= c->cap_rows) return 1;
    size_t cap = c->cap_rows ? c->cap_rows : 64;
    while (cap < rows) {
        if (cap > SIZE_MAX / 64) return 0;
        cap *= 2;
    }
    for (int i = 0; i < N_STR; i++)
        if (!buf_grow(&c->str_off[i], 4 * (cap + 1) - c->str_off[i].len)
            || !buf_grow(&c->str_valid[i], cap / 8 + 1 - c->str_valid[i].len))
            return 0;
    for (int i = 0; i < N_RAW; i++)
        if (!buf_grow(&c->raw_off[i], 4 * (cap + 1) - c->raw_off[i].len)) return 0;
    for (int i = 0; i < N_INT; i++)
        if (!buf_grow(&c->int_val[i], 8 * cap - c->int_val[i].len)
            || !buf_grow(&c->int_tag[i], cap - c->int_tag[i].len))
            return 0;
    c->cap_rows = cap;
    return 1;
}

static int commit(Ctx *c) {
    size_t row = c->n;
    if (!ensure_rows(c, row + 1)) return 0;
    for (int i = 0; i < N_STR; i++) {
        Slot *sl = &c->str[i];
        Buf *d = &c->str_data[i];
        unsigned char *valid = (unsigned char *)c->str_valid[i].p;
        if (row % 8 == 0) valid[row >> 3] = 0;
        if (sl->kind >= 2) {
            size_t len = (size_t)(sl->e - sl->s);
            if (d->cap - d->len < len && !buf_grow(d, len)) return 0;
            if (sl->kind == 3) d->len += unescape(sl->s, sl->e, d->p + d->len);
            /* len 0 (""): d->p may still be NULL, and memcpy(NULL, ., 0) is UB */
            else if (len) { memcpy(d->p + d->len, sl->s, len); d->len += len; }
            valid[row >> 3] |= (unsigned char)(1u << (row & 7));
        }
        ((int32_t *)c->str_off[i].p)[row + 1] = (int32_t)d->len;
    }
    for (int i = 0; i < N_RAW; i++) {
        Slot *sl = &c->raw[i];
        if (sl->kind && !buf_put(&c->raw_data[i], sl->s, (size_t)(sl->e - sl->s))) return 0;
        ((int32_t *)c->raw_off[i].p)[row + 1] = (int32_t)c->raw_data[i].len;
    }
    for (int i = 0; i < N_INT; i++) {
        Slot *sl = &c->num[i];
        uint8_t tag = sl->kind == 4 ? 1 : sl->kind == 5 ? 2 : 0;
        ((int64_t *)c->int_val[i].p)[row] = tag == 1 ? sl->v : 0;
        ((uint8_t *)c->int_tag[i].p)[row] = tag;
        if (tag == 2) {
            int64_t q[4] = {(int64_t)row, i, sl->s - c->base, sl->e - c->base};
            if (!buf_put(&c->odd, q, sizeof q)) return 0;
        }
    }
    c->n++;
    return 1;
}

/* the fixed-width columns' lengths, from the row count */
static void close_rows(Ctx *c) {
    for (int i = 0; i < N_STR; i++) {
        c->str_off[i].len = 4 * (c->n + 1);
        c->str_valid[i].len = (c->n + 7) / 8;
    }
    for (int i = 0; i < N_RAW; i++) c->raw_off[i].len = 4 * (c->n + 1);
    for (int i = 0; i < N_INT; i++) {
        c->int_val[i].len = 8 * c->n;
        c->int_tag[i].len = c->n;
    }
}

/* one event object at *pp */
static int read_event(const char **pp, const char *end, Ctx *c) {
    const char *p = *pp;
    for (int i = 0; i < N_STR; i++) c->str[i].kind = 0;
    for (int i = 0; i < N_RAW; i++) c->raw[i].kind = 0;
    for (int i = 0; i < N_INT; i++) c->num[i].kind = 0;
    if (p >= end || *p != '{') return 0;
    p = ws(p + 1, end);
    if (p < end && *p == '}') { p++; goto done; }
    char tmp[256];
    const char *key;
    for (;;) {
        size_t klen;
        if (!read_key(&p, end, tmp, &key, &klen)) return 0;
        p = ws(p, end);
        if (p >= end || *p != ':') return 0;
        p = ws(p + 1, end);
        int ok, f = event_field(key, klen);
        if (f == 300) ok = read_args(&p, end, c);
        else if (f >= 200) ok = read_str(&p, end, &c->str[f - 200]);
        else if (f >= 100) ok = read_raw(&p, end, &c->raw[f - 100], 1);
        else if (f >= 0) ok = read_num(&p, end, &c->num[f]);
        else ok = skip_value(&p, end, 1);
        if (!ok) return 0;
        p = ws(p, end);
        if (p >= end) return 0;
        if (*p == ',') { p = ws(p + 1, end); continue; }
        if (*p == '}') { p++; break; }
        return 0;
    }
done:
    if (!commit(c)) { c->nomem = 1; return 0; }
    *pp = p;
    return 1;
}

/* events separated by commas from *pp up to a closing bracket (close) or the end (0) */
static int read_array_items(const char **pp, const char *end, Ctx *c, char close) {
    const char *p = ws(*pp, end);
    if (close ? (p < end && *p == close) : p == end) {
        *pp = close ? p + 1 : p;
        return 1;
    }
    for (;;) {
        if (!read_event(&p, end, c)) return 0;
        p = ws(p, end);
        if (p < end && *p == ',') { p = ws(p + 1, end); continue; }
        if (close) {
            if (p < end && *p == close) { *pp = p + 1; return 1; }
            return 0;
        }
        if (p == end) { *pp = p; return 1; }
        return 0;
    }
}

static int read_document(const char *p, const char *end, Ctx *c) {
    int seen = 0;
    p = ws(p, end);
    if (p >= end || *p != '{') return 0;
    p = ws(p + 1, end);
    if (p < end && *p == '}') return 0;  /* no traceEvents */
    char tmp[256];
    const char *key;
    for (;;) {
        size_t klen;
        if (!read_key(&p, end, tmp, &key, &klen)) return 0;
        p = ws(p, end);
        if (p >= end || *p != ':') return 0;
        p = ws(p + 1, end);
        int i;
        if (klen == 11 && memcmp(key, "traceEvents", 11) == 0) {
            if (seen++) return 0;  /* a repeated array: the Python reader's to judge */
            if (p >= end || *p != '[') return 0;
            p++;
            if (!read_array_items(&p, end, c, ']')) return 0;
        } else if ((i = find(key, klen, META_NAMES, N_META)) >= 0) {
            c->meta_s[i] = p;
            if (!skip_value(&p, end, 0)) return 0;
            c->meta_e[i] = p;
        } else if (!skip_value(&p, end, 0)) {
            return 0;
        }
        p = ws(p, end);
        if (p >= end) return 0;
        if (*p == ',') { p = ws(p + 1, end); continue; }
        if (*p == '}') { p++; break; }
        return 0;
    }
    return seen && ws(p, end) == end;
}

/* ---- the result: buffers owned by Python objects --------------------------------------- */

typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t len;
} NativeBuffer;

static void nb_dealloc(NativeBuffer *self) {
    free(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int nb_getbuffer(NativeBuffer *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->p, self->len, 1, flags);
}

static Py_ssize_t nb_length(NativeBuffer *self) { return self->len; }

static PyBufferProcs nb_as_buffer = {(getbufferproc)nb_getbuffer, NULL};
static PySequenceMethods nb_as_sequence = {.sq_length = (lenfunc)nb_length};

static PyTypeObject NativeBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "traceviz.parsers._kineto_native.NativeBuffer",
    .tp_basicsize = sizeof(NativeBuffer),
    .tp_dealloc = (destructor)nb_dealloc,
    .tp_as_buffer = &nb_as_buffer,
    .tp_as_sequence = &nb_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only memory a native read returned (buffer protocol).",
};

/* the buffer, its memory handed to a Python object (the Buf left empty) */
static PyObject *take(Buf *b) {
    NativeBuffer *o = PyObject_New(NativeBuffer, &NativeBufferType);
    if (!o) return NULL;
    if (!b->p) {
        b->p = malloc(16);  /* an empty column still has an address */
        if (!b->p) { Py_DECREF(o); return PyErr_NoMemory(); }
    }
    o->p = b->p;
    o->len = (Py_ssize_t)b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return (PyObject *)o;
}

static int put(PyObject *d, const char *key, PyObject *value) {
    if (!value) return 0;
    int r = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return r == 0;
}

static PyObject *result(Ctx *c, int document) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    if (!put(d, "n", PyLong_FromSize_t(c->n))) goto fail;
    /* the validity bitmap covers every row (a last byte for a row count that is a
       multiple of 8 is never needed but harmless) */
    for (int i = 0; i < N_STR; i++)
        if (!put(d, STR_NAMES[i].s, Py_BuildValue("(NNN)", take(&c->str_off[i]),
                                                take(&c->str_data[i]),
                                                take(&c->str_valid[i]))))
            goto fail;
    for (int i = 0; i < N_RAW; i++)
        if (!put(d, RAW_NAMES[i].s, Py_BuildValue("(NN)", take(&c->raw_off[i]),
                                                take(&c->raw_data[i]))))
            goto fail;
    for (int i = 0; i < N_INT; i++)
        if (!put(d, INT_NAMES[i].s, Py_BuildValue("(NN)", take(&c->int_val[i]),
                                                take(&c->int_tag[i]))))
            goto fail;
    if (!put(d, "odd", take(&c->odd))) goto fail;
    if (document) {
        PyObject *m = PyDict_New();
        if (!put(d, "meta", m)) goto fail;
        for (int i = 0; i < N_META; i++)
            if (c->meta_s[i] && !put(m, META_NAMES[i].s, Py_BuildValue(
                    "(nn)", (Py_ssize_t)(c->meta_s[i] - c->base),
                    (Py_ssize_t)(c->meta_e[i] - c->base))))
                goto fail;
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

static PyObject *read_events(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"data", "document", NULL};
    Py_buffer view;
    int document = 0;
    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|p:read_events", kwlist, &view,
                                     &document))
        return NULL;
    if (view.len >= INT32_MAX - 16) {  /* int32 offsets: the Python reader takes it */
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    Ctx *c = calloc(1, sizeof(Ctx));
    if (!c) { PyBuffer_Release(&view); return PyErr_NoMemory(); }
    const char *p = view.buf, *end = (const char *)view.buf + view.len;
    c->base = p;
    int ok;
    Py_BEGIN_ALLOW_THREADS
    /* room for the rows a Kineto event's size suggests (about 200 bytes; a page of the
       room never written is never resident), grown by doubling past it */
    size_t rows = (size_t)view.len / 128 + 64;
    if (!ensure_rows(c, rows)) c->nomem = 1;
    for (int i = 0; i < N_STR && !c->nomem; i++) {
        ((int32_t *)c->str_off[i].p)[0] = 0;
        if (!buf_grow(&c->str_data[i], i == S_NAME ? (size_t)view.len / 4 : 16 * rows))
            c->nomem = 1;
    }
    for (int i = 0; i < N_RAW && !c->nomem; i++) {
        ((int32_t *)c->raw_off[i].p)[0] = 0;
        if (i <= R_DUR && !buf_grow(&c->raw_data[i], 20 * rows)) c->nomem = 1;
    }
    ok = !c->nomem && (document ? read_document(p, end, c) : read_array_items(&p, end, c, 0));
    close_rows(c);
    Py_END_ALLOW_THREADS
    PyObject *out;
    if (c->nomem) out = PyErr_NoMemory();
    else if (!ok) { Py_INCREF(Py_None); out = Py_None; }
    else out = result(c, document);
    ctx_free(c);
    free(c);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"read_events", (PyCFunction)(void (*)(void))read_events, METH_VARARGS | METH_KEYWORDS,
     "read_events(data, document=False) -> dict | None: Kineto events as column "
     "buffers, None where the Python reader must decode them (see the module's source)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_kineto_native",
    .m_doc =
        "A compiled reader of Kineto event arrays into column buffers (stable API).\n\n"
        "read_events(data, document=False) -> dict | None\n"
        "  data: bytes-like; the inside of the event array (document=False) or a whole\n"
        "  document whose \"traceEvents\" key holds it (document=True). None: not read\n"
        "  here (invalid JSON, a field of the wrong type, ...): the Python reader's.\n"
        "  The dict: \"n\" (events); \"ph\", \"cat\", \"name\": (offsets int32[n+1], utf-8\n"
        "  data, validity bitmap); \"ts\", \"dur\" and the raw args: (offsets, data) of\n"
        "  their raw JSON text, empty where absent; the number fields (INT_FIELDS):\n"
        "  (values int64[n], tags uint8[n]: 0 absent/null, 1 int64, 2 other, in \"odd\");\n"
        "  \"odd\": int64 (row, field, start, end) per other value, its text\n"
        "  data[start:end]; \"meta\" (document=True): {key: (start, end)}.\n"
        "  Buffers: read-only NativeBuffer objects (buffer protocol), wrapped without\n"
        "  copying. The GIL is released while reading; calls may run in several threads.\n"
        "  See the header of kineto_native.c for the details.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__kineto_native(void) {
    if (PyType_Ready(&NativeBufferType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    Py_INCREF(&NativeBufferType);
    if (PyModule_AddObject(m, "NativeBuffer", (PyObject *)&NativeBufferType) < 0) {
        Py_DECREF(&NativeBufferType);
        Py_DECREF(m);
        return NULL;
    }
    PyObject *fields = Py_BuildValue(
        "(sssssssss)", INT_NAMES[0].s, INT_NAMES[1].s, INT_NAMES[2].s, INT_NAMES[3].s,
        INT_NAMES[4].s, INT_NAMES[5].s, INT_NAMES[6].s, INT_NAMES[7].s, INT_NAMES[8].s);
    if (!fields || PyModule_AddObject(m, "INT_FIELDS", fields) < 0) {
        Py_XDECREF(fields);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
