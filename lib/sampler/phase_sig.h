/*
 * The arithmetic of phase signatures that the offline phase detection
 * (lib/model/phases.c) and the sampler's online one (phase.c) must do
 * alike: the pc hash of the code signature and the noise-corrected norm of
 * a signature (docs/model.md, "Phases"). One copy, so the two cannot drift
 * apart.
 *
 * Freestanding (no libc, no libm): the dbi tool compiles the sampler with
 * neither. The model includes this header; the sampler never includes the
 * model's.
 */
#ifndef LOMAS_SAMPLER_PHASE_SIG_H
#define LOMAS_SAMPLER_PHASE_SIG_H

#include <stdint.h>

/* Buckets of the code signature. */
#define PHASE_CODE_BUCKETS 32u

/* The code-signature bucket of a pc: a 64-bit mix (splitmix64's finalizer),
 * because the pcs of one loop are close together. */
static inline uint32_t phase_code_bucket(uint64_t pc)
{
	pc ^= pc >> 30;
	pc *= 0xbf58476d1ce4e5b9ull;
	pc ^= pc >> 27;
	pc *= 0x94d049bb133111ebull;
	pc ^= pc >> 31;
	return (uint32_t)(pc % PHASE_CODE_BUCKETS);
}

/*
 * Estimated squared norm of the rates behind the sum of k windows' counts
 * over n buckets, given that sum's total (sum) and sum of squares (sum2).
 * For a mean m of k windows' Poisson counts, E|m|^2 = |lambda|^2 +
 * sum(lambda)/k, so the noise sum/k^2 is taken off; the estimate is floored
 * at the flattest distribution with that many counts, (sum m)^2 / n
 * (Cauchy-Schwarz).
 */
static inline double phase_rate_norm2(double sum, double sum2, double k, uint32_t n)
{
	double s = sum / k, s2 = sum2 / (k * k);
	double est = s2 - s / k, flat = s * s / (double)n;
	return est > flat ? est : flat;
}

#endif /* LOMAS_SAMPLER_PHASE_SIG_H */
