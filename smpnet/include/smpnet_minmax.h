/* smpnet_minmax.h - include/linux/minmax.h's, array_size.h's, math.h's and
 * align.h's helpers in a user's `ab` file; smpnet.h includes it. Docs:
 * docs/experiments/ab.md. */
#ifndef SMPNET_MINMAX_H
#define SMPNET_MINMAX_H

/* Each argument evaluated once into a temporary of a name no caller has
 * (__UNIQUE_ID(), as the kernel's: a caller's x_ would be captured), of
 * the argument's promoted type (a bit-field's too); min()/max() of two types the
 * kernel would refuse (its type check) are the C promotion's here,
 * min_t()/max_t() cast both, as the kernel's do. */
#define __PASTE_(a, b)		a##b
#define __PASTE(a, b)		__PASTE_(a, b)
#define __UNIQUE_ID(prefix)	__PASTE(__PASTE(__UNIQUE_ID_, prefix), __COUNTER__)
#define SMPNET_CMP_(x, y, op, ux, uy)	({ __typeof__((x) + 0) ux = (x);		\
					   __typeof__((y) + 0) uy = (y); ux op uy ? ux : uy; })
#define SMPNET_CMP(x, y, op)	SMPNET_CMP_(x, y, op, __UNIQUE_ID(x_), __UNIQUE_ID(y_))
#define min(x, y)		SMPNET_CMP(x, y, <)
#define max(x, y)		SMPNET_CMP(x, y, >)
#define min_t(type, x, y)	SMPNET_CMP((type)(x), (type)(y), <)
#define max_t(type, x, y)	SMPNET_CMP((type)(x), (type)(y), >)
#define min3(x, y, z)		min((__typeof__(x))min(x, y), z)
#define max3(x, y, z)		max((__typeof__(x))max(x, y), z)
#define clamp(val, lo, hi)	min((__typeof__(val))max(val, lo), hi)
#define clamp_t(type, val, lo, hi)	min_t(type, max_t(type, val, lo), hi)
#define clamp_val(val, lo, hi)	clamp_t(__typeof__(val), val, lo, hi)
#define SMPNET_SWAP_(a, b, t)	do { __auto_type t = (a); (a) = (b); (b) = t; } while (0)
#define swap(a, b)		SMPNET_SWAP_(a, b, __UNIQUE_ID(t_))

#define ARRAY_SIZE(arr)		(sizeof(arr) / sizeof((arr)[0]))
#define DIV_ROUND_UP(n, d)	(((n) + (d) - 1) / (d))
#define ALIGN(x, a)		(((x) + ((__typeof__(x))(a) - 1)) & ~((__typeof__(x))(a) - 1))
#define ALIGN_DOWN(x, a)	ALIGN((x) - ((a) - 1), (a))
#define IS_ALIGNED(x, a)	(((x) & ((__typeof__(x))(a) - 1)) == 0)
#define round_up(x, y)		((((x) - 1) | ((__typeof__(x))((y) - 1))) + 1)
#define round_down(x, y)	((x) & ~((__typeof__(x))((y) - 1)))

#endif
