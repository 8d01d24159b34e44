/* traceviz.algos._intervals_native: the innermost interval around each query, in one pass.
 *
 * The numpy version (traceviz/algos/intervals.py, innermost_enclosing) jumps back over
 * ranges that ended with a sparse table of running maxima: O((n + q) log n) time and
 * log2(n) copies of the ends. Walking the sorted intervals and queries once with a stack
 * of the intervals still open answers the same question in O(n + q) after the sorts,
 * which the caller makes (numpy): the normalization of a large trace spends most of its
 * op-tree time there. The numpy version stays as the fallback (no compiler at install)
 * and as the oracle the tests compare this one with.
 *
 * Python API (see traceviz/algos/_intervals_native.pyi):
 *
 *   innermost(group, start, end, q_group, q_time, q_id, ex_off, ex_id, out) -> None
 *
 *   group, start, end: int64[n], the intervals in rank order: sorted by group, then
 *     start, then longer first (the caller's lexsort; equal ones keep their order).
 *   q_group, q_time, q_id: int64[m], the plain queries sorted by (group, time), and each
 *     one's index into out.
 *   ex_off: int64[n + 1], ex_id: int64[k]: the queries that exclude an interval, by the
 *     interval's rank (CSR: ex_id[ex_off[r]:ex_off[r + 1]] exclude rank r). Such a query
 *     asks at the interval's own start for the intervals ranked before it (an op's
 *     parent); the caller checks that its time is that start.
 *   out: int64, writable, one entry per query: set to the rank of the latest-ranked
 *     interval of the query's group with start <= time < end, or left as it is (-1)
 *     where none.
 *
 * Why a stack is exact for any intervals, nested or not: an interval is pushed when the
 * walk reaches its start, so the stack holds every interval started so far, in rank
 * order; one that ended by a query's time is popped from the top and cannot contain any
 * later query (times only grow within a group, and a new group pops the old one). After
 * the pops, the top is the latest-ranked interval still open: the answer.
 *
 * The GIL is released during the walk; nothing is shared between calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    const int64_t *g, *s, *e;
    int64_t *stack;
    Py_ssize_t top;  /* entries in the stack */
} Walk;

/* the latest-ranked interval of group g open at time t, -1 where none */
static inline int64_t answer(Walk *w, int64_t g, int64_t t) {
    while (w->top > 0) {
        int64_t r = w->stack[w->top - 1];
        if (w->g[r] == g && w->e[r] > t) return r;
        w->top--;  /* ended, or an earlier group: no later query needs it */
    }
    return -1;
}

/* does the plain query (qg, qt) come before interval r in the walk: at equal times the
 * interval first (a range that starts at a query's time contains it) */
static inline int before(int64_t qg, int64_t qt, int64_t g, int64_t s) {
    return qg < g || (qg == g && qt < s);
}

static void walk(Walk *w, Py_ssize_t n, const int64_t *qg, const int64_t *qt,
                 const int64_t *qid, Py_ssize_t m, const int64_t *ex_off,
                 const int64_t *ex_id, int64_t *out) {
    Py_ssize_t j = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        for (; j < m && before(qg[j], qt[j], w->g[r], w->s[r]); j++) {
            int64_t a = answer(w, qg[j], qt[j]);
            if (a >= 0) out[qid[j]] = a;
        }
        for (int64_t k = ex_off[r]; k < ex_off[r + 1]; k++) {  /* before r is pushed */
            int64_t a = answer(w, w->g[r], w->s[r]);
            if (a >= 0) out[ex_id[k]] = a;
        }
        w->stack[w->top++] = r;
    }
    for (; j < m; j++) {
        int64_t a = answer(w, qg[j], qt[j]);
        if (a >= 0) out[qid[j]] = a;
    }
}

/* an int64 vector argument (C-contiguous, of `want` items; -1: any length) */
static int vector(PyObject *o, Py_buffer *b, Py_ssize_t want, int writable, const char *what) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                           (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (b->itemsize != 8 || (f[0] != 'q' && f[0] != 'l') || f[1] != '\0' || b->ndim > 1 ||
        (want >= 0 && b->len / 8 != want)) {
        if (want >= 0)
            PyErr_Format(PyExc_ValueError, "%s: expected %zd int64 values", what, want);
        else
            PyErr_Format(PyExc_ValueError, "%s: expected int64 values", what);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *innermost(PyObject *self, PyObject *args) {
    PyObject *o[9];
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &o[8]))
        return NULL;
    static const char *names[9] = {"group", "start", "end", "q_group", "q_time", "q_id",
                                   "ex_off", "ex_id", "out"};
    Py_buffer b[9];
    int got = 0;
    PyObject *result = NULL;
    Py_ssize_t n = -1, m = -1;
    for (; got < 9; got++) {
        Py_ssize_t want = got == 1 || got == 2 ? n : got == 4 || got == 5 ? m
                        : got == 6 ? n + 1 : -1;
        if (vector(o[got], &b[got], want, got == 8, names[got]) < 0) goto done;
        if (got == 0) n = b[0].len / 8;
        if (got == 3) m = b[3].len / 8;
    }
    const int64_t *ex_off = b[6].buf;
    Py_ssize_t k = b[7].len / 8, q = b[8].len / 8;
    const int64_t *qid = b[5].buf, *ex_id = b[7].buf;
    /* every index in range before the walk trusts them */
    if (n > 0 && (ex_off[0] != 0 || ex_off[n] != k)) {
        PyErr_SetString(PyExc_ValueError, "ex_off: not the offsets of ex_id");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (ex_off[i] > ex_off[i + 1]) {
            PyErr_SetString(PyExc_ValueError, "ex_off: not increasing");
            goto done;
        }
    for (Py_ssize_t i = 0; i < m; i++)
        if (qid[i] < 0 || qid[i] >= q) {
            PyErr_SetString(PyExc_ValueError, "q_id: an index outside out");
            goto done;
        }
    for (Py_ssize_t i = 0; i < k; i++)
        if (ex_id[i] < 0 || ex_id[i] >= q) {
            PyErr_SetString(PyExc_ValueError, "ex_id: an index outside out");
            goto done;
        }
    Walk w = {b[0].buf, b[1].buf, b[2].buf, malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t)),
              0};
    if (!w.stack) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    walk(&w, n, b[3].buf, b[4].buf, qid, m, n > 0 ? ex_off : NULL, ex_id, b[8].buf);
    Py_END_ALLOW_THREADS
    free(w.stack);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"innermost", innermost, METH_VARARGS,
     "innermost(group, start, end, q_group, q_time, q_id, ex_off, ex_id, out) -> None: "
     "the rank of the latest-ranked interval around each query, written into out (see "
     "the module's source)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_intervals_native",
    .m_doc = "The innermost interval around each query, by one walk with a stack (the "
             "numpy version in traceviz.algos.intervals is the fallback and the oracle).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__intervals_native(void) { return PyModule_Create(&moduledef); }
