/* One event read into the context's slots and committed as a row; the event array and the whole document.
 * Part of traceviz/parsers/kineto_native.c, the one translation unit that includes it. */
#ifndef TRACEVIZ_KINETO_NATIVE_EVENT_H
#define TRACEVIZ_KINETO_NATIVE_EVENT_H

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
    for (int i = 0; i <= R_DUR; i++)
        if (!buf_grow(&c->us_ns[i], 8 * cap - c->us_ns[i].len)) return 0;
    c->cap_rows = cap;
    return 1;
}

/* A number of microseconds spelled -?D+(.d{1,3})? whose whole part is below US_LIMIT, as
   exact nanoseconds: the value Arrow's cast of the same text to decimal128(38, 3) holds,
   unscaled, and one kineto/times.py keeps (it flags |ns| >= US_LIMIT * 1000). 0 for any
   other spelling (an exponent, more decimals, more digits, text, null) or a larger
   value: the column is then converted from its raw text on the Python side, as without
   this. A 16-digit epoch in microseconds (Kineto's ts) is below the limit. */
#define US_LIMIT 9000000000000000LL
static int us_to_ns(const char *s, const char *e, int64_t *out) {
    int neg = s < e && *s == '-';
    s += neg;
    int64_t v = 0;
    int digits = 0;
    for (; s < e && *s >= '0' && *s <= '9'; s++) {
        if (++digits > 16) return 0;  /* 16 digits stay below 2^63 */
        v = v * 10 + (*s - '0');
    }
    if (!digits || v >= US_LIMIT) return 0;
    int64_t frac = 0;
    int decimals = 0;
    if (s < e && *s == '.') {
        for (s++; s < e && *s >= '0' && *s <= '9'; s++) {
            if (++decimals > 3) return 0;
            frac = frac * 10 + (*s - '0');
        }
        if (!decimals) return 0;
    }
    if (s != e) return 0;
    for (; decimals < 3; decimals++) frac *= 10;
    v = v * 1000 + frac;
    *out = neg ? -v : v;
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
    for (int i = 0; i <= R_DUR; i++) {
        int64_t ns = 0;
        Slot *sl = &c->raw[i];
        if (sl->kind && !c->us_other[i] && !us_to_ns(sl->s, sl->e, &ns)) c->us_other[i] = 1;
        ((int64_t *)c->us_ns[i].p)[row] = ns;
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
    for (int i = 0; i <= R_DUR; i++) c->us_ns[i].len = 8 * c->n;
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


#endif  /* TRACEVIZ_KINETO_NATIVE_EVENT_H */
