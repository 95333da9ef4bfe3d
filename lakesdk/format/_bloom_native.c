/*
 * Hudi's bloom filters, hashed and tested in C: the optional native part of
 * lakesdk.format.bloom_hash (which does the same work with numpy when this module is not built);
 * with the other per-record work of a base file that Arrow does slower: the least and greatest
 * key of the footer (lakesdk.format.bloom.key_range), the text of the records' sequence
 * numbers (lakesdk.format.keys.sequence_numbers) and of integer record keys (lakesdk.format.keys).
 *
 * A key's bits: its UTF-8 bytes hashed nb times with Hadoop's 32-bit MurmurHash2 (tail bytes
 * sign-extended, as Java's bytes are), each time seeded with the previous hash (0 first); bit
 * |h % vector_size| of the signed hash.  Keys are hashed a chunk at a time, one hash round over
 * the whole chunk after the other, so that the rounds of different keys overlap in the core.
 * Bits are numbered as Hadoop's BitSet serializes them: bit p of a row is bit p % 8 (least
 * significant first) of its byte p / 8.
 *
 * Every function takes buffers (bytes, numpy arrays) and releases the GIL while it works.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define M 0x5BD1E995u
#define CHUNK 256

/* The seed-independent part of the hash of a chunk of keys: each key's mixed 4-byte blocks
 * (block j of key i at blocks[j * CHUNK + i]), length, tail and tail multiplier. */
typedef struct {
    uint32_t len[CHUNK], tail[CHUNK], tmul[CHUNK], h[CHUNK];
    int32_t nblocks[CHUNK];
    int fewest, most;   /* the fewest and most blocks of a key of the chunk */
    uint32_t *blocks;
    size_t cap;   /* blocks per key the buffer holds */
} chunk_t;

static int prepare(chunk_t *c, const uint8_t *data, const int64_t *off, int64_t first, int n) {
    size_t most = 0;
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)(off[first + i + 1] - off[first + i]) >> 2;
        if (b > most) most = b;
    }
    if (most > c->cap) {
        uint32_t *grown = (uint32_t *)realloc(c->blocks, most * CHUNK * sizeof(uint32_t));
        if (grown == NULL) return -1;
        c->blocks = grown;
        c->cap = most;
    }
    c->fewest = INT_MAX;
    c->most = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *p = data + off[first + i];
        uint32_t len = (uint32_t)(off[first + i + 1] - off[first + i]);
        int nb = (int)(len >> 2);
        for (int j = 0; j < nb; j++) {
            const uint8_t *q = p + 4 * j;
            uint32_t k = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) | ((uint32_t)q[3] << 24);
            k *= M;
            k ^= k >> 24;
            k *= M;
            c->blocks[(size_t)j * CHUNK + i] = k;
        }
        const uint8_t *t = p + 4 * nb;
        uint32_t tail = 0;
        switch (len & 3) {   /* Java bytes: sign-extended */
        case 3: tail = ((uint32_t)(int32_t)(int8_t)t[0] << 16) ^ ((uint32_t)(int32_t)(int8_t)t[1] << 8)
                       ^ (uint32_t)(int32_t)(int8_t)t[2]; break;
        case 2: tail = ((uint32_t)(int32_t)(int8_t)t[0] << 8) ^ (uint32_t)(int32_t)(int8_t)t[1]; break;
        case 1: tail = (uint32_t)(int32_t)(int8_t)t[0]; break;
        }
        c->nblocks[i] = nb;
        if (nb < c->fewest) c->fewest = nb;
        if (nb > c->most) c->most = nb;
        c->len[i] = len;
        c->tail[i] = tail;
        c->tmul[i] = (len & 3) ? M : 1u;
        c->h[i] = 0;
    }
    return 0;
}

/* On x86-64 with glibc, the hash rounds are also compiled for AVX2 (eight keys a multiplication),
 * chosen when the library loads on a core that has it. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__GLIBC__) && (!defined(__clang__) || __clang_major__ >= 14)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif
/* GCC vectorizes loops of a count known only at run time from -O3 (or -O2 with the dynamic cost
 * model); Python's own build may compile extensions at -O2 */
#if defined(__GNUC__) && !defined(__clang__)
#define VECTORIZED __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define VECTORIZED
#endif

/* The next hash of every key of the chunk (seeded with the last), in c->h: the blocks every key
 * has (c->fewest) a block at a time across the keys, which the compiler vectorizes, then each
 * longer key's own. */
VECTOR_CLONES VECTORIZED
static void next_hash(chunk_t *c, int n) {
    uint32_t *restrict h = c->h;
    for (int i = 0; i < n; i++) h[i] ^= c->len[i];
    for (int j = 0; j < c->fewest; j++) {
        const uint32_t *restrict b = c->blocks + (size_t)j * CHUNK;
        for (int i = 0; i < n; i++) h[i] = (h[i] * M) ^ b[i];
    }
    if (c->most > c->fewest) {
        for (int i = 0; i < n; i++) {
            uint32_t x = h[i];
            for (int j = c->fewest; j < c->nblocks[i]; j++) x = (x * M) ^ c->blocks[(size_t)j * CHUNK + i];
            h[i] = x;
        }
    }
    for (int i = 0; i < n; i++) {
        uint32_t x = (h[i] ^ c->tail[i]) * c->tmul[i];
        x ^= x >> 13;
        x *= M;
        x ^= x >> 15;
        h[i] = x;
    }
}

/* Java's Math.abs(h % size) of the signed hash h: |h| % size, the remainder by multiplication
 * where the compiler has 128-bit integers (exact for every 32-bit |h| and size: Lemire, Kaser and
 * Kurz, "Faster remainder by direct computation", 2019), with inv = fast_inverse(size). */
#if defined(__SIZEOF_INT128__)
static inline uint64_t fast_inverse(uint32_t size) { return UINT64_C(0xFFFFFFFFFFFFFFFF) / size + 1; }
static inline uint32_t bit_of(uint32_t h, uint32_t size, uint64_t inv) {
    int32_t s = (int32_t)h;
    uint32_t a = s < 0 ? (uint32_t)(-(int64_t)s) : (uint32_t)s;
    uint64_t low = inv * a;
    return (uint32_t)(((__uint128_t)low * size) >> 64);
}
#else
static inline uint64_t fast_inverse(uint32_t size) { (void)size; return 0; }
static inline uint32_t bit_of(uint32_t h, uint32_t size, uint64_t inv) {
    (void)inv;
    int32_t s = (int32_t)h;
    uint32_t a = s < 0 ? (uint32_t)(-(int64_t)s) : (uint32_t)s;
    return a % size;
}
#endif

/* What to do with the hashes h of keys first .. first + cn - 1 under hash round r: their bit
 * positions are bit_of(h[i], vs). */
typedef void (*emit_t)(void *to, int64_t first, int r, const uint32_t *h, int cn, uint32_t vs);

/* Every key's nb hashes, for a vector of vs bits, handed to emit a chunk and a round at a time.
 * Runs without the GIL; -1 when out of memory. */
#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

/* (inlined at each use, so that the compiler calls emit directly, in the round's own loop) */
INLINE int hash_keys(const uint8_t *data, const int64_t *off, int64_t n, int nb, uint32_t vs, emit_t emit, void *to) {
    chunk_t *c = (chunk_t *)calloc(1, sizeof(chunk_t));
    if (c == NULL) return -1;
    int rc = 0;
    for (int64_t first = 0; first < n; first += CHUNK) {
        int cn = (int)(n - first < CHUNK ? n - first : CHUNK);
        if (prepare(c, data, off, first, cn) < 0) {
            rc = -1;
            break;
        }
        for (int r = 0; r < nb; r++) {
            next_hash(c, cn);
            emit(to, first, r, c->h, cn, vs);
        }
    }
    free(c->blocks);
    free(c);
    return rc;
}

/* set_bits: each position set in its key's row of packed bits */
typedef struct {
    uint8_t *out;
    const int64_t *rows;   /* NULL: row 0 */
    Py_ssize_t row_bytes;
} packed_t;

static void set_packed(void *to, int64_t first, int r, const uint32_t *h, int cn, uint32_t vs) {
    (void)r;
    packed_t *p = (packed_t *)to;
    const uint64_t inv = fast_inverse(vs);
    for (int i = 0; i < cn; i++) {
        uint32_t at = bit_of(h[i], vs, inv);
        uint8_t *row = p->out + (p->rows ? p->rows[first + i] : 0) * p->row_bytes;
        row[at >> 3] |= (uint8_t)(1u << (at & 7));
    }
}

/* positions: each round's positions in its row of an (nb, n) table */
typedef struct {
    uint32_t *out;
    int64_t n;
} table_t;

static void copy_positions(void *to, int64_t first, int r, const uint32_t *h, int cn, uint32_t vs) {
    table_t *t = (table_t *)to;
    uint32_t *dst = t->out + (size_t)r * t->n + first;
    const uint64_t inv = fast_inverse(vs);
    for (int i = 0; i < cn; i++) dst[i] = bit_of(h[i], vs, inv);
}

typedef struct {
    Py_buffer data, off, rows, out;
} buffers_t;

static void release(buffers_t *b) {
    if (b->data.obj) PyBuffer_Release(&b->data);
    if (b->off.obj) PyBuffer_Release(&b->off);
    if (b->rows.obj) PyBuffer_Release(&b->rows);
    if (b->out.obj) PyBuffer_Release(&b->out);
}

/* The keys (UTF-8 bytes, n + 1 int64 offsets into them) and their count, checked. */
static int keys_of(buffers_t *b, int64_t *n) {
    if (b->off.len % 8 || b->off.len < 8) {
        PyErr_SetString(PyExc_ValueError, "offsets: n + 1 int64 values expected");
        return -1;
    }
    const int64_t *off = (const int64_t *)b->off.buf;
    *n = b->off.len / 8 - 1;
    for (int64_t i = 0; i < *n; i++) {
        if (off[i] < 0 || off[i + 1] < off[i] || off[i + 1] > b->data.len) {
            PyErr_SetString(PyExc_ValueError, "offsets out of the data's bounds");
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(set_bits_doc,
"set_bits(data, offsets, rows, nb_hash, vector_size, row_bytes, out)\n\n"
"Set the bits of every key in ``out`` (rows of ``row_bytes`` bytes back to back): key i in\n"
"row ``rows[i]`` (int64; None: row 0).");

static PyObject *set_bits(PyObject *self, PyObject *args) {
    PyObject *rows_obj;
    int nb;
    unsigned int vs;
    Py_ssize_t row_bytes;
    buffers_t b = {0};
    if (!PyArg_ParseTuple(args, "y*y*OiIny*", &b.data, &b.off, &rows_obj, &nb, &vs, &row_bytes, &b.out))
        goto fail;
    int64_t n;
    if (keys_of(&b, &n) < 0) goto fail;
    if (vs == 0 || nb < 0 || row_bytes < (Py_ssize_t)((vs + 7) / 8)) {
        PyErr_SetString(PyExc_ValueError, "vector_size, nb_hash or row_bytes out of range");
        goto fail;
    }
    const int64_t *rows = NULL;
    if (rows_obj != Py_None) {
        if (PyObject_GetBuffer(rows_obj, &b.rows, PyBUF_SIMPLE) < 0) goto fail;
        if (b.rows.len != n * 8) {
            PyErr_SetString(PyExc_ValueError, "rows: one int64 per key expected");
            goto fail;
        }
        rows = (const int64_t *)b.rows.buf;
    }
    Py_ssize_t nrows = b.out.len / row_bytes;
    for (int64_t i = 0; rows != NULL && i < n; i++) {
        if (rows[i] < 0 || rows[i] >= nrows) {
            PyErr_SetString(PyExc_ValueError, "a key's row is beyond the output");
            goto fail;
        }
    }
    if (b.out.readonly) {
        PyErr_SetString(PyExc_ValueError, "out must be writable");
        goto fail;
    }
    packed_t to = {(uint8_t *)b.out.buf, rows, row_bytes};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = hash_keys((const uint8_t *)b.data.buf, (const int64_t *)b.off.buf, n, nb, vs, set_packed, &to);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    release(&b);
    Py_RETURN_NONE;
fail:
    release(&b);
    return NULL;
}

PyDoc_STRVAR(positions_doc,
"positions(data, offsets, nb_hash, vector_size, out)\n\n"
"The nb_hash bit positions of every key into ``out`` (uint32, shape (nb_hash, n), C order).");

static PyObject *positions(PyObject *self, PyObject *args) {
    int nb;
    unsigned int vs;
    buffers_t b = {0};
    if (!PyArg_ParseTuple(args, "y*y*iIy*", &b.data, &b.off, &nb, &vs, &b.out)) goto fail;
    int64_t n;
    if (keys_of(&b, &n) < 0) goto fail;
    if (vs == 0 || nb < 0 || b.out.readonly || b.out.len != (Py_ssize_t)nb * n * 4) {
        PyErr_SetString(PyExc_ValueError, "out: a writable uint32 buffer of nb_hash * n values expected");
        goto fail;
    }
    table_t to = {(uint32_t *)b.out.buf, n};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = hash_keys((const uint8_t *)b.data.buf, (const int64_t *)b.off.buf, n, nb, vs, copy_positions, &to);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    release(&b);
    Py_RETURN_NONE;
fail:
    release(&b);
    return NULL;
}

PyDoc_STRVAR(test_doc,
"test(buf, values, starts, positions, todo, found)\n\n"
"Per key k of ``todo`` (int64 indices into the n keys of ``positions``, uint32 (nb_hash, n)):\n"
"set ``found[k]`` (uint8) when some row of the filter has every bit of k.  Row r's bits start\n"
"at byte ``starts[r]`` (int64) of the filter's bytes: ``buf`` itself, or with ``values`` (the\n"
"value of each of 256 characters, 0xFF: every bit set) the Base64 text of them.");

static PyObject *test(PyObject *self, PyObject *args) {
    PyObject *values_obj;
    Py_buffer buf = {0}, values = {0}, starts = {0}, pos = {0}, todo = {0}, found = {0};
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*Oy*y*y*y*", &buf, &values_obj, &starts, &pos, &todo, &found)) goto done;
    const uint8_t *table = NULL;
    if (values_obj != Py_None) {
        if (PyObject_GetBuffer(values_obj, &values, PyBUF_SIMPLE) < 0) goto done;
        if (values.len != 256) {
            PyErr_SetString(PyExc_ValueError, "values: 256 bytes expected");
            goto done;
        }
        table = (const uint8_t *)values.buf;
    }
    Py_ssize_t n = found.len, nrows = starts.len / 8, ntodo = todo.len / 8;
    if (found.readonly || (n && pos.len % (n * 4))) {
        PyErr_SetString(PyExc_ValueError, "positions: uint32 (nb_hash, n) for n found flags expected");
        goto done;
    }
    int nb = n ? (int)(pos.len / (n * 4)) : 0;
    const int64_t *st = (const int64_t *)starts.buf;
    const int64_t *td = (const int64_t *)todo.buf;
    const uint32_t *p = (const uint32_t *)pos.buf;
    for (Py_ssize_t i = 0; i < ntodo; i++) {
        if (td[i] < 0 || td[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "todo: an index beyond the keys");
            goto done;
        }
    }
    for (Py_ssize_t r = 0; r < nrows; r++) {
        if (st[r] < 0) {
            PyErr_SetString(PyExc_ValueError, "a filter row starts before the buffer");
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *bytes = (const uint8_t *)buf.buf;
    const int64_t len = buf.len;
    uint8_t *out = (uint8_t *)found.buf;
    for (Py_ssize_t i = 0; i < ntodo; i++) {
        int64_t k = td[i];
        for (Py_ssize_t r = 0; r < nrows && !out[k]; r++) {
            int all = 1;
            for (int h = 0; h < nb && all; h++) {
                uint32_t at = p[(size_t)h * n + k];
                int64_t byte = st[r] + (at >> 3);
                /* a bit beyond the buffer (a damaged filter) reads as set: maybe, never no */
                if (table) {   /* bit b of the decoded bytes (most significant first) is bit 5 - b % 6 of character b / 6 */
                    int64_t b = byte * 8 + 7 - (at & 7);
                    all = b / 6 >= len ? 1 : (table[bytes[b / 6]] >> (5 - b % 6)) & 1;
                } else {
                    all = byte >= len ? 1 : (bytes[byte] >> (at & 7)) & 1;
                }
            }
            if (all) out[k] = 1;
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    if (buf.obj) PyBuffer_Release(&buf);
    if (values.obj) PyBuffer_Release(&values);
    if (starts.obj) PyBuffer_Release(&starts);
    if (pos.obj) PyBuffer_Release(&pos);
    if (todo.obj) PyBuffer_Release(&todo);
    if (found.obj) PyBuffer_Release(&found);
    return result;
}

/* Byte order of keys i and j (as memcmp, the shorter first on a tie), their first 8 bytes
 * compared as one big-endian number first. */
static inline uint64_t head8(const uint8_t *p, int64_t len) {
    uint64_t v = 0;
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (len >= 8) {
        memcpy(&v, p, 8);
        return __builtin_bswap64(v);
    }
#endif
    int64_t k = len < 8 ? len : 8;
    for (int64_t i = 0; i < k; i++) v |= (uint64_t)p[i] << (56 - 8 * i);
    return v;
}

static inline int compare_keys(const uint8_t *d, const int64_t *o, int64_t i, uint64_t hi_, int64_t j, uint64_t hj) {
    if (hi_ != hj) return hi_ < hj ? -1 : 1;
    int64_t li = o[i + 1] - o[i], lj = o[j + 1] - o[j];
    int64_t m = li < lj ? li : lj;
    for (int64_t k = 8; k < m; k += 8) {    /* the next 8 bytes of both, as one number each */
        uint64_t a = head8(d + o[i] + k, m - k), b = head8(d + o[j] + k, m - k);
        if (a != b) return a < b ? -1 : 1;
    }
    return (li > lj) - (li < lj);
}

PyDoc_STRVAR(key_range_doc,
"key_range(data, offsets) -> (least, greatest)\n\n"
"The indices of the least and the greatest key in byte order (the first of equal keys);\n"
"(-1, -1) when there is no key.");

static PyObject *key_range(PyObject *self, PyObject *args) {
    buffers_t b = {0};
    if (!PyArg_ParseTuple(args, "y*y*", &b.data, &b.off)) goto fail;
    int64_t n;
    if (keys_of(&b, &n) < 0) goto fail;
    int64_t lo = -1, hi = -1;
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *d = (const uint8_t *)b.data.buf;
    const int64_t *o = (const int64_t *)b.off.buf;
    if (n > 0) {
        lo = hi = 0;
        uint64_t hlo = head8(d + o[0], o[1] - o[0]), hhi = hlo;
        for (int64_t i = 1; i < n; i++) {
            uint64_t h = head8(d + o[i], o[i + 1] - o[i]);
            if (compare_keys(d, o, i, h, lo, hlo) < 0) {
                lo = i;
                hlo = h;
            } else if (compare_keys(d, o, i, h, hi, hhi) > 0) {
                hi = i;
                hhi = h;
            }
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    return Py_BuildValue("LL", (long long)lo, (long long)hi);
fail:
    release(&b);
    return NULL;
}

PyDoc_STRVAR(decimals_doc,
"decimals(prefix, start, offsets, data)\n\n"
"The strings prefix + the decimal digits of start, start + 1, ... (start >= 0), one per\n"
"offset: ``offsets`` (int32, n + 1) and ``data`` (uint8, exactly the strings' bytes) filled.");

static PyObject *decimals(PyObject *self, PyObject *args) {
    Py_buffer prefix = {0}, off = {0}, data = {0};
    long long start;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*Lw*w*", &prefix, &start, &off, &data)) goto done;
    if (start < 0 || off.len % 4 || off.len < 4) {
        PyErr_SetString(PyExc_ValueError, "start >= 0 and n + 1 int32 offsets expected");
        goto done;
    }
    int64_t n = off.len / 4 - 1;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    char digits[24];             /* the current number's digits, right-aligned in digits[4..23] */
    int width = 0;
    unsigned long long v = (unsigned long long)start;
    do {
        digits[23 - width++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    int32_t *o = (int32_t *)off.buf;
    uint8_t *out = (uint8_t *)data.buf;
    const int64_t cap = data.len, lp = prefix.len;
    int64_t pos = 0;
    o[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (pos + lp + width > cap || pos + lp + width > INT32_MAX) {
            ok = 0;
            break;
        }
        memcpy(out + pos, prefix.buf, (size_t)lp);
        memcpy(out + pos + lp, digits + 24 - width, (size_t)width);
        pos += lp + width;
        o[i + 1] = (int32_t)pos;
        int k = 23;              /* the next number: add one with carries */
        while (k >= 24 - width && digits[k] == '9') digits[k--] = '0';
        if (k >= 24 - width) {
            digits[k]++;
        } else if (width < 20) {
            digits[23 - width++] = '1';
        }
    }
    if (pos != cap) ok = 0;
    Py_END_ALLOW_THREADS
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "data: exactly the bytes of the strings expected");
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    if (prefix.obj) PyBuffer_Release(&prefix);
    if (off.obj) PyBuffer_Release(&off);
    if (data.obj) PyBuffer_Release(&data);
    return result;
}

PyDoc_STRVAR(integers_doc,
"integers(values, offsets, data)\n\n"
"The decimal text of int64 ``values`` (a '-' before a negative one), as Arrow casts them to\n"
"strings: with ``data`` None, ``offsets`` (int32, n + 1) filled and the bytes they need\n"
"returned (-1 beyond 2^31 - 1); then, given ``data`` of exactly that many bytes, the digits.");

static const char PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline int digit_count(uint64_t u) {
    int d = 1;
    while (u >= 10) {
        u /= 10;
        d++;
    }
    return d;
}

static PyObject *integers(PyObject *self, PyObject *args) {
    Py_buffer vals = {0}, off = {0}, data = {0};
    PyObject *data_obj, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*w*O", &vals, &off, &data_obj)) goto done;
    if (vals.len % 8 || off.len != (vals.len / 8 + 1) * 4) {
        PyErr_SetString(PyExc_ValueError, "n int64 values and n + 1 int32 offsets expected");
        goto done;
    }
    const int64_t n = vals.len / 8;
    const int64_t *v = (const int64_t *)vals.buf;
    int32_t *o = (int32_t *)off.buf;
    if (data_obj == Py_None) {
        int64_t pos = 0;
        Py_BEGIN_ALLOW_THREADS
        o[0] = 0;
        for (int64_t i = 0; i < n && pos <= INT32_MAX; i++) {
            uint64_t u = v[i] < 0 ? 0 - (uint64_t)v[i] : (uint64_t)v[i];
            pos += digit_count(u) + (v[i] < 0);
            o[i + 1] = (int32_t)(pos <= INT32_MAX ? pos : 0);
        }
        Py_END_ALLOW_THREADS
        result = PyLong_FromLongLong(pos <= INT32_MAX ? (long long)pos : -1LL);
        goto done;
    }
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_WRITABLE) < 0) goto done;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    uint8_t *out = (uint8_t *)data.buf;
    int64_t pos = 0;
    if (o[0] != 0) ok = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        uint64_t u = v[i] < 0 ? 0 - (uint64_t)v[i] : (uint64_t)v[i];
        int len = digit_count(u) + (v[i] < 0);
        if (o[i + 1] != pos + len || pos + len > data.len) {
            ok = 0;
            break;
        }
        uint8_t *end = out + pos + len;
        while (u >= 100) {          /* two digits at a time, from the right */
            unsigned r = (unsigned)(u % 100);
            u /= 100;
            end -= 2;
            end[0] = (uint8_t)PAIRS[2 * r];
            end[1] = (uint8_t)PAIRS[2 * r + 1];
        }
        if (u >= 10) {
            end -= 2;
            end[0] = (uint8_t)PAIRS[2 * u];
            end[1] = (uint8_t)PAIRS[2 * u + 1];
        } else {
            *--end = (uint8_t)('0' + u);
        }
        if (v[i] < 0) *--end = '-';
        pos += len;
    }
    if (pos != data.len) ok = 0;
    Py_END_ALLOW_THREADS
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "offsets and data: those integers(values, offsets, None) gave expected");
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    if (vals.obj) PyBuffer_Release(&vals);
    if (off.obj) PyBuffer_Release(&off);
    if (data.obj) PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"set_bits", set_bits, METH_VARARGS, set_bits_doc},
    {"positions", positions, METH_VARARGS, positions_doc},
    {"test", test, METH_VARARGS, test_doc},
    {"key_range", key_range, METH_VARARGS, key_range_doc},
    {"decimals", decimals, METH_VARARGS, decimals_doc},
    {"integers", integers, METH_VARARGS, integers_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bloom_native",
    "Hudi's bloom filters hashed and tested in C, key ranges, sequence numbers and integer keys' text (see lakesdk.format.bloom_hash).", -1, methods,
};

PyMODINIT_FUNC PyInit__bloom_native(void) { return PyModule_Create(&module); }
