/* smpnet_minmax.h - include/linux/minmax.h's, array_size.h's, math.h's and
 * align.h's helpers in a user's `ab` file; smpnet.h includes it. Docs:
 * docs/experiments/ab.md. */
#ifndef SMPNET_MINMAX_H
#define SMPNET_MINMAX_H

/* Each argument evaluated once, as the kernel's; min()/max() of two
 * types the kernel would refuse (its type check) are the C promotion's
 * here, min_t()/max_t() cast both, as the kernel's do. */
#define SMPNET_CMP(x, y, op)	({ __typeof__(x) x_ = (x); __typeof__(y) y_ = (y); \
				   x_ op y_ ? x_ : y_; })
#define min(x, y)		SMPNET_CMP(x, y, <)
#define max(x, y)		SMPNET_CMP(x, y, >)
#define min_t(type, x, y)	SMPNET_CMP((type)(x), (type)(y), <)
#define max_t(type, x, y)	SMPNET_CMP((type)(x), (type)(y), >)
#define min3(x, y, z)		min((__typeof__(x))min(x, y), z)
#define max3(x, y, z)		max((__typeof__(x))max(x, y), z)
#define clamp(val, lo, hi)	min((__typeof__(val))max(val, lo), hi)
#define clamp_t(type, val, lo, hi)	min_t(type, max_t(type, val, lo), hi)
#define clamp_val(val, lo, hi)	clamp_t(__typeof__(val), val, lo, hi)
#define swap(a, b)		do { __typeof__(a) t_ = (a); (a) = (b); (b) = t_; } while (0)

#define ARRAY_SIZE(arr)		(sizeof(arr) / sizeof((arr)[0]))
#define DIV_ROUND_UP(n, d)	(((n) + (d) - 1) / (d))
#define ALIGN(x, a)		(((x) + ((__typeof__(x))(a) - 1)) & ~((__typeof__(x))(a) - 1))
#define ALIGN_DOWN(x, a)	ALIGN((x) - ((a) - 1), (a))
#define IS_ALIGNED(x, a)	(((x) & ((__typeof__(x))(a) - 1)) == 0)
#define round_up(x, y)		((((x) - 1) | ((__typeof__(x))((y) - 1))) + 1)
#define round_down(x, y)	((x) & ~((__typeof__(x))((y) - 1)))

#endif
