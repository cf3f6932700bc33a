// Arithmetic expressions on the GPU, one launch per batch: every thread evaluates the typed
// program (ops/arithmetic/expr.rs, children before parents, root last) for its elements, with
// the cpu evaluator's semantics word for word. A value is a 64-bit word: integers sign- or
// zero-extended, floats as double bits (FLOAT rounded to f32 after every operation, as the
// cpu). Operands are converted to the node's compute type, the operation applied, the result
// wrapped to the node's type. Integer overflow wraps; division by zero sets the sample's flag.
// The four basic operations, sqrt, fmod, floor and ceil are exactly rounded here as on the
// cpu; the other library functions (pow, exp, sin, ...) may differ from the host's libm in
// the last bit of the double (so rarely in a FLOAT result).
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

typedef unsigned long long u64;
typedef long long i64;

// Same codes as cast.cu (`type_code` in ops/cast/gpu.rs).
enum Type { U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, I64 = 6, F16 = 7, F32 = 8, F64 = 9, BOOL = 10, U64 = 11 };

// `expr::Op` in declaration order (a unit test in gpu.rs checks the names).
enum Op {
    Add, Sub, Mul, FDiv, Div, Mod, Pow, FPow, Min, Max, Atan2, Eq, Neq, Lt, Leq, Gt, Geq, BitAnd, BitOr, BitXor,
    Minus, Plus, Abs, FAbs, Sqrt, Rsqrt, Cbrt, Exp, Log, Log2, Log10, Sin, Cos, Tan, Asin, Acos, Atan,
    Sinh, Cosh, Tanh, Asinh, Acosh, Atanh, Floor, Ceil, Clamp,
};

enum Kind { INPUT = 0, CONST = 1, CALL = 2 };
enum Cls { S = 0, U = 1, F = 2 };
enum Mode { DENSE = 0, SCALAR = 1, STRIDED = 2 };

// Most nodes a program may have (the host checks).
#define MAX_NODES 128

struct Node {
    int kind, op, dtype, compute;
    int ch[3];
    int input;
    u64 bits; // CONST: the value word
};

__device__ __forceinline__ double dbl(u64 v) { return __longlong_as_double((i64)v); }
__device__ __forceinline__ u64 bits(double d) { return (u64)__double_as_longlong(d); }

__device__ __forceinline__ int cls(int t) {
    switch (t) {
    case I8: case I16: case I32: case I64: return S;
    case F16: case F32: case F64: return F;
    default: return U;
    }
}

// expr.rs `wrap_one`: integer results wrap to their width, FLOAT rounds to f32.
__device__ __forceinline__ u64 wrap(int t, u64 v) {
    switch (t) {
    case I8: return (u64)(i64)(signed char)v;
    case I16: return (u64)(i64)(short)v;
    case I32: return (u64)(i64)(int)v;
    case U8: return v & 0xffULL;
    case U16: return v & 0xffffULL;
    case U32: return v & 0xffffffffULL;
    case BOOL: return v != 0;
    case F32: return bits((double)__double2float_rn(dbl(v)));
    default: return v;
    }
}

// Rust's saturating `f64 as i64` / `f64 as u64` (NaN -> 0).
__device__ __forceinline__ i64 f64_to_i64(double d) {
    if (d != d) return 0;
    if (d >= 9223372036854775808.0) return 0x7fffffffffffffffLL;
    if (d < -9223372036854775808.0) return (i64)(1ULL << 63);
    return (i64)d;
}
__device__ __forceinline__ u64 f64_to_u64(double d) {
    if (d != d || d < 1.0) return 0;
    if (d >= 18446744073709551616.0) return 0xffffffffffffffffULL;
    return (u64)d;
}

// expr.rs `convert`: a word of type `from` as type `to`.
__device__ __forceinline__ u64 convert(int from, int to, u64 v) {
    if (from == to) return v;
    const int cf = cls(from), ct = cls(to);
    if (ct == F) {
        if (cf == S) v = bits(to == F32 ? (double)__ll2float_rn((i64)v) : __ll2double_rn((i64)v));
        else if (cf == U) v = bits(to == F32 ? (double)__ull2float_rn(v) : __ull2double_rn(v));
    } else if (cf == F) {
        v = ct == S ? (u64)f64_to_i64(dbl(v)) : f64_to_u64(dbl(v));
    }
    return to == F64 ? v : wrap(to, v);
}

// DALI's integer power: negative exponents give 0 (expr.rs `ipow_s` / `ipow_u`).
__device__ u64 ipow(u64 b, u64 e, bool is_signed) {
    if (is_signed && (i64)e < 0) return 0;
    u64 r = 1;
    while (e > 0) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

// expr.rs `apply` for one element; `*div0` set on an integer division by zero.
__device__ u64 apply(int op, int c, u64 a, u64 b, u64 z, bool* div0) {
    if (c == F) {
        const double x = dbl(a), y = dbl(b);
        switch (op) {
        case Add: return bits(__dadd_rn(x, y));
        case Sub: return bits(__dsub_rn(x, y));
        case Mul: return bits(__dmul_rn(x, y));
        case FDiv: case Div: return bits(__ddiv_rn(x, y));
        case Mod: return bits(fmod(x, y));
        case Pow: case FPow: return bits(pow(x, y));
        case Atan2: return bits(atan2(x, y));
        case Min: return y < x ? b : a;
        case Max: return y > x ? b : a;
        case Clamp: {
            const double lo = y, hi = dbl(z);
            return bits(x < lo ? lo : (x > hi ? hi : x));
        }
        case Eq: return x == y;
        case Neq: return x != y;
        case Lt: return x < y;
        case Leq: return x <= y;
        case Gt: return x > y;
        case Geq: return x >= y;
        case Plus: return a;
        case Minus: return bits(-x);
        case Abs: case FAbs: return bits(fabs(x));
        case Sqrt: return bits(__dsqrt_rn(x));
        case Rsqrt: return bits(__ddiv_rn(1.0, __dsqrt_rn(x)));
        case Cbrt: return bits(cbrt(x));
        case Exp: return bits(exp(x));
        case Log: return bits(log(x));
        case Log2: return bits(log2(x));
        case Log10: return bits(log10(x));
        case Sin: return bits(sin(x));
        case Cos: return bits(cos(x));
        case Tan: return bits(tan(x));
        case Asin: return bits(asin(x));
        case Acos: return bits(acos(x));
        case Atan: return bits(atan(x));
        case Sinh: return bits(sinh(x));
        case Cosh: return bits(cosh(x));
        case Tanh: return bits(tanh(x));
        case Asinh: return bits(asinh(x));
        case Acosh: return bits(acosh(x));
        case Atanh: return bits(atanh(x));
        case Floor: return bits(floor(x));
        case Ceil: return bits(ceil(x));
        default: return 0; // bitwise operations never compute in float (typing rejects them)
        }
    }
    const bool s = c == S;
    const i64 x = (i64)a, y = (i64)b;
    switch (op) {
    case Plus: return a;
    case Add: return a + b;
    case Sub: return a - b;
    case Mul: return a * b;
    case Div: case Mod:
        if (b == 0) { *div0 = true; return 0; }
        if (s) {
            // i64::MIN / -1 wraps (and % gives 0), as Rust's wrapping_div / wrapping_rem.
            if (y == -1) return op == Div ? 0ULL - a : 0ULL;
            return (u64)(op == Div ? x / y : x % y);
        }
        return op == Div ? a / b : a % b;
    case Pow: return ipow(a, b, s);
    case Min: return s ? (u64)(x < y ? x : y) : (a < b ? a : b);
    case Max: return s ? (u64)(x > y ? x : y) : (a > b ? a : b);
    case Clamp:
        if (s) { const i64 lo = y, hi = (i64)z; return (u64)(x < lo ? lo : (x > hi ? hi : x)); }
        return a < b ? b : (a > z ? z : a);
    case Eq: return a == b;
    case Neq: return a != b;
    case Lt: return s ? x < y : a < b;
    case Leq: return s ? x <= y : a <= b;
    case Gt: return s ? x > y : a > b;
    case Geq: return s ? x >= y : a >= b;
    case BitAnd: return a & b;
    case BitOr: return a | b;
    case BitXor: return a ^ b;
    case Minus: return 0ULL - a;
    case Abs: return s && x < 0 ? 0ULL - a : a;
    default: return 0; // float functions always compute in float
    }
}

__device__ __forceinline__ u64 load(int t, const void* p, i64 k) {
    switch (t) {
    case U8: case BOOL: return ((const unsigned char*)p)[k];
    case U16: return ((const unsigned short*)p)[k];
    case U32: return ((const unsigned int*)p)[k];
    case U64: return ((const u64*)p)[k];
    case I8: return (u64)(i64)((const signed char*)p)[k];
    case I16: return (u64)(i64)((const short*)p)[k];
    case I32: return (u64)(i64)((const int*)p)[k];
    case I64: return (u64)((const i64*)p)[k];
    case F32: return bits((double)((const float*)p)[k]);
    default: return (u64)((const i64*)p)[k]; // F64
    }
}

__device__ __forceinline__ void store(int t, void* p, i64 k, u64 v) {
    switch (t) {
    case U8: case BOOL: case I8: ((unsigned char*)p)[k] = (unsigned char)v; break;
    case U16: case I16: ((unsigned short*)p)[k] = (unsigned short)v; break;
    case U32: case I32: ((unsigned int*)p)[k] = (unsigned int)v; break;
    case F32: ((float*)p)[k] = __double2float_rn(dbl(v)); break;
    default: ((u64*)p)[k] = v; break; // U64, I64, F64
    }
}

// One sample's record (`samples + i * record_bytes`), `dims` = the launch's dimension count:
//   u64 out; i64 count; i64 shape[dims];
//   per input: u64 ptr; i64 mode; i64 strides[dims]   (element strides, 0 on broadcast axes)
// `flags` (one int per sample) is set where an integer division by zero happened.
extern "C" __global__ void arithmetic(const Node* __restrict__ nodes, int n_nodes, const unsigned char* __restrict__ samples,
                                      long long record_bytes, int n_inputs, int dims, int out_type, int* flags) {
    __shared__ Node prog[MAX_NODES];
    for (int k = threadIdx.x; k < n_nodes; k += blockDim.x) prog[k] = nodes[k];
    __syncthreads();
    const unsigned char* rec = samples + (i64)blockIdx.y * record_bytes;
    void* out = (void*)*(const u64*)rec;
    const i64 count = *(const i64*)(rec + 8);
    const i64* shape = (const i64*)(rec + 16);
    const unsigned char* ins = rec + 16 + 8 * dims;
    const i64 in_bytes = 16 + 8 * (i64)dims;
    bool div0 = false;
    u64 v[MAX_NODES];
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += (i64)gridDim.x * blockDim.x) {
        for (int k = 0; k < n_nodes; ++k) {
            const Node& nd = prog[k];
            if (nd.kind == INPUT) {
                const unsigned char* in = ins + nd.input * in_bytes;
                const void* p = (const void*)*(const u64*)in;
                const i64 mode = *(const i64*)(in + 8);
                i64 at = e;
                if (mode == SCALAR) {
                    at = 0;
                } else if (mode == STRIDED) {
                    const i64* st = (const i64*)(in + 16);
                    i64 rem = e;
                    at = 0;
                    for (int d = dims - 1; d >= 0; --d) {
                        at += (rem % shape[d]) * st[d];
                        rem /= shape[d];
                    }
                }
                v[k] = load(nd.dtype, p, at);
            } else if (nd.kind == CONST) {
                v[k] = nd.bits;
            } else {
                u64 a[3] = {0, 0, 0};
                for (int j = 0; j < 3; ++j) {
                    if (nd.ch[j] >= 0) a[j] = convert(prog[nd.ch[j]].dtype, nd.compute, v[nd.ch[j]]);
                }
                v[k] = wrap(nd.dtype, apply(nd.op, cls(nd.compute), a[0], a[1], a[2], &div0));
            }
        }
        store(out_type, out, e, v[n_nodes - 1]);
    }
    if (div0) flags[blockIdx.y] = 1;
}
