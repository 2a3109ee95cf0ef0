// SPDX-License-Identifier: GPL-2.0
/* The host TSC rate in kHz, for the test VM kernel (tests/vm/run). */
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>
int main(void)
{
	struct timespec a, b, d = { 0, 200000000 };
	unsigned long long t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &a);
	t0 = __rdtsc();
	nanosleep(&d, NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	t1 = __rdtsc();
	printf("%llu\n", (t1 - t0) * 1000000ULL /
	       ((b.tv_sec - a.tv_sec) * 1000000000ULL + b.tv_nsec - a.tv_nsec));
	return 0;
}
