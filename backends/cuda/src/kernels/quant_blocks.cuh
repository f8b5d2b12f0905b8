// ggml's block formats on the GPU (layouts: engine/src/quant/). Two views:
//
// - dequant_value: one value of a row, with exactly the CPU dequantizer's
//   float operations in its order (__fmul_rn / __fadd_rn are never fused
//   into an FMA), so GET_ROWS matches the CPU bit for bit;
// - unpack_chunk: 32 consecutive values of a row as integers q (four per
//   int, for __dp4a) with a scale and an offset per half of 16, so that
//   value = scale * q + offset; the quantized products dot these with Q8_1
//   activations.
//
// The lookup-table types (IQ4_NL, IQ4_XS, MXFP4) unpack to their table's
// signed entries (bytes for __dp4a, as Q8_0's) with a zero offset.

// Bytes per block and values per block of a quantized dtype.
__device__ __forceinline__ int block_bytes(int type) {
    switch (type) {
    case GT_Q4_0: return 18;
    case GT_Q4_1: return 20;
    case GT_Q5_0: return 22;
    case GT_Q5_1: return 24;
    case GT_Q8_0: return 34;
    case GT_Q8_1: return 36;
    case GT_Q2_K: return 84;
    case GT_Q3_K: return 110;
    case GT_Q4_K: return 144;
    case GT_Q5_K: return 176;
    case GT_Q6_K: return 210;
    case GT_Q8_K: return 292;
    case GT_IQ4_NL: return 18;
    case GT_IQ4_XS: return 136;
    case GT_MXFP4: return 17;
    }
    return 0;
}

__device__ __forceinline__ int block_values(int type) {
    return (type >= GT_Q2_K && type <= GT_Q8_K) || type == GT_IQ4_XS ? 256 : 32;
}

// ggml's kvalues_iq4nl (IQ4_NL and IQ4_XS) and kvalues_mxfp4 (twice each
// E2M1 value), as engine/src/quant's KVALUES_IQ4NL / KVALUES_MXFP4.
__constant__ i8 GT_KVALUES_IQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
__constant__ i8 GT_KVALUES_MXFP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 128), built from its bits
// (subnormal for e < 2), exact for every byte (engine's e8m0_to_f32_half).
__device__ __forceinline__ float e8m0_to_f32_half(u8 e) {
    const u32 bits = e < 2 ? (0x00200000u << e) : ((u32)(e - 1) << 23);
    return __uint_as_float(bits);
}

// IQ4_XS: the 6-bit scale of sub-block ib (0..8) minus 32, from scales_h
// (a little-endian u16 at byte 2) and scales_l (4 bytes at byte 4).
__device__ __forceinline__ int iq4xs_scale(const u8* b, int ib) {
    const int low = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF;
    const int high = ((((u32)b[2]) | ((u32)b[3] << 8)) >> (2 * ib)) & 3;
    return (low | (high << 4)) - 32;
}

// The 4-bit index of value j (0..32) in 16 bytes of nibbles: low nibbles
// are values 0..16, high nibbles values 16..32.
__device__ __forceinline__ int table_nibble(const u8* qs, int j) {
    return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
}

// Four table entries, those of the low (shift 0) or high (shift 4) nibbles
// of qs[0..4], packed as signed bytes for __dp4a.
__device__ __forceinline__ int table_pack4(const i8* table, const u8* qs, int shift) {
    u32 v = 0;
    for (int e = 0; e < 4; e++) {
        v |= ((u32)(u8)table[(qs[e] >> shift) & 0xF]) << (8 * e);
    }
    return (int)v;
}

// Q4_K / Q5_K: scale and min of group j (0..8) from the 12 packed bytes.
__device__ __forceinline__ void scale_min_k4(int j, const u8* q, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Q3_K: scale j (0..16), unpacked to sc - 32.
__device__ __forceinline__ int q3k_scale(const u8* scales, int j) {
    const int low = (scales[j % 8] >> (4 * (j / 8))) & 0xF;
    const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
}

// Value l (0 .. block_values) of the block at b, as the CPU dequantizes it.
__device__ float dequant_value(int type, const u8* b, int l) {
    switch (type) {
    case GT_Q4_0: {
        const float d = ld_f16(b);
        const int q = l < 16 ? (b[2 + l] & 0xF) : (b[2 + l - 16] >> 4);
        return __fmul_rn((float)(q - 8), d);
    }
    case GT_Q4_1: {
        const float d = ld_f16(b), m = ld_f16(b + 2);
        const int q = l < 16 ? (b[4 + l] & 0xF) : (b[4 + l - 16] >> 4);
        return __fadd_rn(__fmul_rn((float)q, d), m);
    }
    case GT_Q5_0: {
        const float d = ld_f16(b);
        const u32 qh = ld_u32(b + 2);
        const int q = l < 16 ? ((b[6 + l] & 0xF) | (((qh >> l) << 4) & 0x10))
                             : ((b[6 + l - 16] >> 4) | ((qh >> (l - 16 + 12)) & 0x10));
        return __fmul_rn((float)(q - 16), d);
    }
    case GT_Q5_1: {
        const float d = ld_f16(b), m = ld_f16(b + 2);
        const u32 qh = ld_u32(b + 4);
        const int q = l < 16 ? ((b[8 + l] & 0xF) | (((qh >> l) << 4) & 0x10))
                             : ((b[8 + l - 16] >> 4) | ((qh >> (l - 16 + 12)) & 0x10));
        return __fadd_rn(__fmul_rn((float)q, d), m);
    }
    case GT_Q8_0: return __fmul_rn((float)(i8)b[2 + l], ld_f16(b));
    case GT_Q8_1: return __fmul_rn((float)(i8)b[4 + l], ld_f16(b));
    case GT_Q2_K: {
        const u8* scales = b;
        const u8* qs = b + 16;
        const float d = ld_f16(b + 80), dmin = ld_f16(b + 82);
        const int half = l / 128, r = l % 128, shift = r / 32, rr = r % 32, part = rr / 16;
        const int sc = scales[half * 8 + shift * 2 + part];
        const float dl = __fmul_rn(d, (float)(sc & 0xF));
        const float ml = __fmul_rn(dmin, (float)(sc >> 4));
        const int q = (qs[32 * half + rr] >> (2 * shift)) & 3;
        return __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
    case GT_Q3_K: {
        const u8* hmask = b;
        const u8* qs = b + 32;
        const u8* scales = b + 96;
        const float d = ld_f16(b + 108);
        const int half = l / 128, r = l % 128, shift = r / 32, rr = r % 32, part = rr / 16;
        const float dl = __fmul_rn(d, (float)q3k_scale(scales, half * 8 + shift * 2 + part));
        const int low = (qs[32 * half + rr] >> (2 * shift)) & 3;
        const int v = low - ((hmask[rr] & (1 << (4 * half + shift))) != 0 ? 0 : 4);
        return __fmul_rn(dl, (float)v);
    }
    case GT_Q4_K:
    case GT_Q5_K: {
        const float d = ld_f16(b), dmin = ld_f16(b + 2);
        const u8* scales = b + 4;
        const u8* qh = b + 16;
        const u8* qs = type == GT_Q4_K ? b + 16 : b + 48;
        const int c = l / 64, r = l % 64, hi = r / 32, i = r % 32;
        int sc, m;
        scale_min_k4(2 * c + hi, scales, &sc, &m);
        const float dl = __fmul_rn(d, (float)sc), ml = __fmul_rn(dmin, (float)m);
        int q = hi ? (qs[32 * c + i] >> 4) : (qs[32 * c + i] & 0xF);
        if (type == GT_Q5_K && (qh[i] & (1 << (2 * c + hi))) != 0) {
            q += 16;
        }
        return __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
    case GT_Q6_K: {
        const u8* ql = b;
        const u8* qh = b + 128;
        const i8* scales = (const i8*)(b + 192);
        const float d = ld_f16(b + 208);
        const int h = l / 128, r = l % 128, quarter = r / 32, i = r % 32;
        const int lbyte = ql[64 * h + (quarter & 1) * 32 + i];
        const int low = quarter >= 2 ? (lbyte >> 4) : (lbyte & 0xF);
        const int q = (low | (((qh[32 * h + i] >> (2 * quarter)) & 3) << 4)) - 32;
        const int sc = scales[8 * h + i / 16 + 2 * quarter];
        return __fmul_rn(__fmul_rn(d, (float)sc), (float)q);
    }
    case GT_Q8_K: return __fmul_rn(ld_f32(b), (float)(i8)b[4 + l]);
    // d * kvalue (the CPU's `d * v as f32`).
    case GT_IQ4_NL: return __fmul_rn(ld_f16(b), (float)GT_KVALUES_IQ4NL[table_nibble(b + 2, l)]);
    // kvalue * 2^(e - 128) (the CPU's `v as f32 * d`).
    case GT_MXFP4: return __fmul_rn((float)GT_KVALUES_MXFP4[table_nibble(b + 1, l)], e8m0_to_f32_half(b[0]));
    // dl = d * (ls - 32) rounded to f32 first, then dl * kvalue.
    case GT_IQ4_XS: {
        const int ib = l / 32;
        const float dl = __fmul_rn(ld_f16(b), (float)iq4xs_scale(b, ib));
        return __fmul_rn(dl, (float)GT_KVALUES_IQ4NL[table_nibble(b + 8 + 16 * ib, l % 32)]);
    }
    }
    return 0.0f;
}

// Bit e of the low nibble of `bits` to bit 8e + 4 (a fifth bit per byte lane).
__device__ __forceinline__ u32 fifth_bits(u32 bits) {
    return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

// 32 values of a weight row, starting at value 32 * c, as integers and the
// scale / offset of each half: value = sc[h] * q + off[h]. q[t] holds values
// 4t .. 4t + 3 (one per byte, signed for Q8_0, below 64 otherwise).
__device__ void unpack_chunk(int type, const u8* row, int c, int* q, float* sc, float* off) {
    if (block_values(type) == 32) {
        const u8* b = row + (i64)c * block_bytes(type);
        const float d = ld_f16(b);
        switch (type) {
        case GT_Q8_0:
            for (int t = 0; t < 8; t++) {
                q[t] = (int)ld_u32(b + 2 + 4 * t);
            }
            sc[0] = sc[1] = d;
            off[0] = off[1] = 0.0f;
            return;
        case GT_Q4_0:
        case GT_Q4_1: {
            const u8* qs = b + (type == GT_Q4_0 ? 2 : 4);
            for (int t = 0; t < 4; t++) {
                const u32 v = ld_u32(qs + 4 * t);
                q[t] = (int)(v & 0x0F0F0F0Fu);
                q[4 + t] = (int)((v >> 4) & 0x0F0F0F0Fu);
            }
            sc[0] = sc[1] = d;
            off[0] = off[1] = type == GT_Q4_0 ? -8.0f * d : ld_f16(b + 2);
            return;
        }
        case GT_IQ4_NL:
        case GT_MXFP4: {
            const bool nl = type == GT_IQ4_NL;
            const i8* table = nl ? GT_KVALUES_IQ4NL : GT_KVALUES_MXFP4;
            const u8* qs = b + (nl ? 2 : 1);
            for (int t = 0; t < 4; t++) {
                q[t] = table_pack4(table, qs + 4 * t, 0);
                q[4 + t] = table_pack4(table, qs + 4 * t, 4);
            }
            sc[0] = sc[1] = nl ? d : e8m0_to_f32_half(b[0]);
            off[0] = off[1] = 0.0f;
            return;
        }
        default: {  // Q5_0, Q5_1
            const bool with_min = type == GT_Q5_1;
            const u32 qh = ld_u32(b + (with_min ? 4 : 2));
            const u8* qs = b + (with_min ? 8 : 6);
            for (int t = 0; t < 4; t++) {
                const u32 v = ld_u32(qs + 4 * t);
                q[t] = (int)((v & 0x0F0F0F0Fu) | fifth_bits(qh >> (4 * t)));
                q[4 + t] = (int)(((v >> 4) & 0x0F0F0F0Fu) | fifth_bits(qh >> (16 + 4 * t)));
            }
            sc[0] = sc[1] = d;
            off[0] = off[1] = with_min ? ld_f16(b + 2) : -16.0f * d;
            return;
        }
        }
    }
    const u8* b = row + (i64)(c / 8) * block_bytes(type);
    const int sub = c % 8;
    switch (type) {
    case GT_Q2_K: {
        const u8* scales = b;
        const u8* qs = b + 16;
        const float d = ld_f16(b + 80), dmin = ld_f16(b + 82);
        const int half = sub / 4, shift = sub % 4;
        for (int t = 0; t < 8; t++) {
            q[t] = (int)((ld_u32(qs + 32 * half + 4 * t) >> (2 * shift)) & 0x03030303u);
        }
        for (int h = 0; h < 2; h++) {
            const int s = scales[half * 8 + shift * 2 + h];
            sc[h] = d * (float)(s & 0xF);
            off[h] = -dmin * (float)(s >> 4);
        }
        return;
    }
    case GT_Q3_K: {
        const u8* hmask = b;
        const u8* qs = b + 32;
        const u8* scales = b + 96;
        const float d = ld_f16(b + 108);
        const int half = sub / 4, shift = sub % 4;
        for (int t = 0; t < 8; t++) {
            const u32 low = (ld_u32(qs + 32 * half + 4 * t) >> (2 * shift)) & 0x03030303u;
            const u32 high = (ld_u32(hmask + 4 * t) >> (4 * half + shift)) & 0x01010101u;
            q[t] = (int)(low | (high << 2));
        }
        for (int h = 0; h < 2; h++) {
            const float s = d * (float)q3k_scale(scales, half * 8 + shift * 2 + h);
            sc[h] = s;
            off[h] = -4.0f * s;
        }
        return;
    }
    case GT_Q4_K:
    case GT_Q5_K: {
        const float d = ld_f16(b), dmin = ld_f16(b + 2);
        const u8* scales = b + 4;
        const u8* qh = b + 16;
        const u8* qs = type == GT_Q4_K ? b + 16 : b + 48;
        const int c64 = sub / 2, hi = sub % 2;
        for (int t = 0; t < 8; t++) {
            u32 v = (ld_u32(qs + 32 * c64 + 4 * t) >> (4 * hi)) & 0x0F0F0F0Fu;
            if (type == GT_Q5_K) {
                v |= ((ld_u32(qh + 4 * t) >> (2 * c64 + hi)) & 0x01010101u) << 4;
            }
            q[t] = (int)v;
        }
        int s, m;
        scale_min_k4(sub, scales, &s, &m);
        sc[0] = sc[1] = d * (float)s;
        off[0] = off[1] = -dmin * (float)m;
        return;
    }
    case GT_Q6_K: {
        const u8* ql = b;
        const u8* qh = b + 128;
        const i8* scales = (const i8*)(b + 192);
        const float d = ld_f16(b + 208);
        const int h = sub / 4, quarter = sub % 4;
        const u8* lbase = ql + 64 * h + (quarter & 1) * 32;
        const int lshift = quarter >= 2 ? 4 : 0;
        for (int t = 0; t < 8; t++) {
            const u32 low = (ld_u32(lbase + 4 * t) >> lshift) & 0x0F0F0F0Fu;
            const u32 high = (ld_u32(qh + 32 * h + 4 * t) >> (2 * quarter)) & 0x03030303u;
            q[t] = (int)(low | (high << 4));
        }
        for (int hh = 0; hh < 2; hh++) {
            const float s = d * (float)scales[8 * h + 2 * quarter + hh];
            sc[hh] = s;
            off[hh] = -32.0f * s;
        }
        return;
    }
    case GT_IQ4_XS: {
        const u8* qs = b + 8 + 16 * sub;
        for (int t = 0; t < 4; t++) {
            q[t] = table_pack4(GT_KVALUES_IQ4NL, qs + 4 * t, 0);
            q[4 + t] = table_pack4(GT_KVALUES_IQ4NL, qs + 4 * t, 4);
        }
        sc[0] = sc[1] = ld_f16(b) * (float)iq4xs_scale(b, sub);
        off[0] = off[1] = 0.0f;
        return;
    }
    }
    for (int t = 0; t < 8; t++) {
        q[t] = 0;
    }
    sc[0] = sc[1] = off[0] = off[1] = 0.0f;
}
