/* A tiny kernel for self-checks (`kiln info --check`, the cache and memo
 * tests): it writes a pattern the host can recompute, so a wrong binary or a
 * kernel that never ran shows up as wrong data.
 *
 * Build options: none required.
 * Launch: one work-item per element; out[i] = (i * 2654435761) ^ seed,
 * computed in 32-bit unsigned arithmetic. */
__kernel void kiln_probe(__global uint *out, uint seed) {
  size_t i = get_global_id(0);
  out[i] = ((uint)i * 2654435761u) ^ seed;
}
