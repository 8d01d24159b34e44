/* The column buffers a read fills, the fields it keeps and one read's context.
 * Part of traceviz/parsers/kineto_native.c, the one translation unit that includes it. */
#ifndef TRACEVIZ_KINETO_NATIVE_COLUMNS_H
#define TRACEVIZ_KINETO_NATIVE_COLUMNS_H

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
    Buf us_ns[R_DUR + 1];   /* ts and dur as exact ns (0 where absent), see us_to_ns */
    int us_other[R_DUR + 1];  /* a value of another spelling met: that column is not given */
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
    for (int i = 0; i <= R_DUR; i++) free(c->us_ns[i].p);
    free(c->odd.p);
}


#endif  /* TRACEVIZ_KINETO_NATIVE_COLUMNS_H */
