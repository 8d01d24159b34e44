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
 *   ascii_count(data, needle) -> (bool, int): data.isascii() and data.count(needle)
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
 *     "ts_ns", "dur_ns": int64[n], the value as exact nanoseconds (0 where absent), where
 *        every value present is spelled -?D+(.d{1,3})? with a whole part below 9e15;
 *        None where one is not (the raw text then says what it is).
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

/* the reader in parts, included here: one translation unit, so the compiler inlines across them */
#include "kineto_native/columns.h"
#include "kineto_native/scan.h"
#include "kineto_native/event.h"

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
    for (int i = 0; i <= R_DUR; i++) {
        char key[8];
        snprintf(key, sizeof key, "%s_ns", RAW_NAMES[i].s);
        PyObject *v = c->us_other[i] ? Py_NewRef(Py_None) : take(&c->us_ns[i]);
        if (!put(d, key, v)) goto fail;
    }
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

/* ascii_count(data, needle) -> (bool, int): whether every byte of data is ASCII, and how
   many times needle occurs in it without overlap (data.isascii(), data.count(needle)).
   With the GIL released: a small trace's document is checked on the read-ahead thread
   while the main thread imports, and the two bytes methods held the GIL for ~12 ms. */
static PyObject *ascii_count(PyObject *module, PyObject *args) {
    Py_buffer view, needle;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*y*:ascii_count", &view, &needle)) return NULL;
    int ascii;
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    const unsigned char *p = view.buf;
    size_t n = (size_t)view.len, i = 0;
    uint64_t high = 0;  /* the bytes or-ed together, eight at a time */
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        high |= w;
    }
    for (; i < n; i++) high |= p[i];
    ascii = (high & 0x8080808080808080ULL) == 0;
    size_t k = (size_t)needle.len;
    if (k == 0) {
        count = (Py_ssize_t)n + 1;  /* as bytes.count(b"") */
    } else {
        const unsigned char *q = needle.buf, *at = p, *end = p + n;
        while ((size_t)(end - at) >= k
               && (at = memchr(at, q[0], (size_t)(end - at) - k + 1)) != NULL) {
            if (memcmp(at, q, k) == 0) {
                count++;
                at += k;
            } else {
                at++;
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&needle);
    return Py_BuildValue("(On)", ascii ? Py_True : Py_False, count);
}

static PyMethodDef methods[] = {
    {"ascii_count", ascii_count, METH_VARARGS,
     "ascii_count(data, needle) -> (bool, int): data.isascii() and data.count(needle), "
     "with the GIL released."},
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
        "  data[start:end]; \"ts_ns\", \"dur_ns\": int64 exact ns (0 absent), or None\n"
        "  where a value is not -?D+(.d{1,3})? below 9e15; \"meta\"\n"
        "  (document=True): {key: (start, end)}.\n"
        "  Buffers: read-only NativeBuffer objects (buffer protocol), wrapped without\n"
        "  copying. The GIL is released while reading; calls may run in several threads.\n"
        "  See the header of kineto_native.c for the details.\n\n"
        "ascii_count(data, needle) -> (bool, int)\n"
        "  data.isascii() and data.count(needle), with the GIL released.",
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
