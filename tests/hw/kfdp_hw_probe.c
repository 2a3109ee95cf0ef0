// SPDX-License-Identifier: GPL-2.0
/*
 * kfdp-hw-probe: what the priority daemon's design rests on
 * (activity-detection: seeing a queue's pending work from its read and
 * write pointers), measured on a GPU. Prints JSON; a measurement, not a
 * test: it judges nothing.
 *
 *  rptr_writeback: for each of --samples dispatches of the short "stamp"
 *    kernel, the host spins on both the completion signal and the queue's
 *    read index (the CP's write-back of its read pointer) and records when
 *    each moved. Negative deltas: the read pointer moved before the
 *    dispatch completed (the CP writes it back when it fetches a packet).
 *  doorbells_while_preempted: --doorbells dispatches written and rung on a
 *    queue kfd_preempt holds preempted; the amdgpu interrupts counted in
 *    /proc/interrupts over the preempted window beside an idle window of
 *    the same length, and how many dispatches ran before and after resume.
 *
 * Needs kfd_preempt loaded, a GPU and ROCm's HSA runtime; exits 4 (skip)
 * with the reason otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu.h"
#include "kit.h"
#include "kit_hsa.h"

#define WINDOW_MS 200

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Interrupts of every "amdgpu" line of /proc/interrupts, all CPUs. */
static long long amdgpu_interrupts(void)
{
	FILE *f = fopen("/proc/interrupts", "r");
	long long total = 0;
	char line[4096];

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':'), *end;

		if (!p || !strstr(line, "amdgpu"))
			continue;
		for (p++;; p = end) {
			long long v = strtoll(p, &end, 10);

			if (end == p)
				break;
			total += v;
		}
	}
	fclose(f);
	return total;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

static double pct_us(long long *v, int n, double q)
{
	int rank = (int)(q * n + 0.999999);

	if (n == 0)
		return 0;
	rank = rank < 1 ? 1 : rank > n ? n : rank;
	return v[rank - 1] / 1000.0;
}

/* One JSON member; @last closes the object. */
static void json_int(const char *key, long long v, int last)
{
	printf("\"%s\": %lld%s", key, v, last ? "}" : ", ");
}

static void json_us(const char *key, double v, int last)
{
	printf("\"%s\": %.3f%s", key, v, last ? "}" : ", ");
}

struct probe {
	struct kit_gpu *g;
	struct kit_kernel stamp;
	uint64_t *stamps;
	int owner;
	__u32 handle;
};

/*
 * One stamp dispatch of slot @slot on @q, signalling @done. Its kernel
 * arguments live until the probe exits: it is short-lived. Without
 * kernel-argument memory nothing is dispatched and the wait times out.
 */
static void stamp(struct probe *p, hsa_queue_t *q, __u32 slot, hsa_signal_t done)
{
	kit_gpu_stamp(p->g, &p->stamp, q, p->stamps, slot, done);
}

static int rptr_writeback(struct probe *p, int samples)
{
	long long *delta = calloc(samples, sizeof(*delta));
	hsa_queue_t *q = kit_gpu_queue(p->g, HSA_QUEUE_TYPE_MULTI);
	hsa_signal_t done;
	int i, n = 0, before = 0;

	if (!delta || !q || hsa.hsa_signal_create(1, 0, NULL, &done) != HSA_STATUS_SUCCESS)
		return -ENOMEM;
	for (i = 0; i < samples; i++) {
		long long t_done = 0, t_rptr = 0, start, t;
		uint64_t index = hsa.hsa_queue_load_read_index_relaxed(q);

		hsa.hsa_signal_store_relaxed(done, 1);
		stamp(p, q, i % 64, done);
		start = now_ns();
		do {
			t = now_ns();
			if (!t_done && hsa.hsa_signal_load_relaxed(done) < 1)
				t_done = t;
			if (!t_rptr && hsa.hsa_queue_load_read_index_relaxed(q) > index)
				t_rptr = t;
		} while ((!t_done || !t_rptr) && t - start < 1000000000LL);
		if (t_done && t_rptr) {
			delta[n++] = t_rptr - t_done;
			before += t_rptr < t_done;
		}
	}
	qsort(delta, n, sizeof(*delta), cmp_ll);
	printf("  \"%s\": {", "rptr_writeback_us");
	json_int("samples", n, 0);
	json_int("timeouts", samples - n, 0);
	json_int("read_pointer_before_completion", before, 0);
	json_us("min", pct_us(delta, n, 0), 0);
	json_us("p50", pct_us(delta, n, 0.5), 0);
	json_us("p99", pct_us(delta, n, 0.99), 0);
	json_us("max", pct_us(delta, n, 1), 1);
	printf(",\n");
	hsa.hsa_signal_destroy(done);
	hsa.hsa_queue_destroy(q);
	free(delta);
	return 0;
}

static int doorbells_while_preempted(struct probe *p, int count)
{
	hsa_queue_t *q = kit_gpu_queue(p->g, HSA_QUEUE_TYPE_MULTI);
	long long idle, held, ran_held;
	struct kit_queue kq;
	hsa_signal_t done;
	int i, r;

	if (!q || hsa.hsa_signal_create(count, 0, NULL, &done) != HSA_STATUS_SUCCESS)
		return -ENOMEM;
	r = kit_hsa_identify(p->owner, p->handle, q->base_address, &kq);
	if (r)
		return r;
	idle = amdgpu_interrupts();
	kit_sleep_ms(WINDOW_MS);
	idle = amdgpu_interrupts() - idle;
	r = kit_batch(p->owner, KFDP_IOC_PREEMPT, p->handle, &kq, 1, NULL);
	if (r)
		return r;
	held = amdgpu_interrupts();
	for (i = 0; i < count; i++)
		stamp(p, q, i % 64, done);
	kit_sleep_ms(WINDOW_MS);
	held = amdgpu_interrupts() - held;
	ran_held = count - (long long)hsa.hsa_signal_load_relaxed(done);
	r = kit_batch(p->owner, KFDP_IOC_RESUME, p->handle, &kq, 1, NULL);
	if (r)
		return r;
	r = kit_gpu_wait(done, 10000);
	printf("  \"%s\": {", "doorbells_on_a_preempted_queue");
	json_int("dispatches", count, 0);
	json_int("window_ms", WINDOW_MS, 0);
	json_int("ran_while_preempted", ran_held, 0);
	json_int("completed_after_resume", count - (long long)hsa.hsa_signal_load_relaxed(done), 0);
	json_int("amdgpu_interrupts_idle_window", idle, 0);
	json_int("amdgpu_interrupts_preempted_window", held, 1);
	printf(",\n");
	hsa.hsa_signal_destroy(done);
	hsa.hsa_queue_destroy(q);
	return 0;
}

int main(int argc, char **argv)
{
	struct kit_tenant t = { .drv = &kit_hsa_driver, .fd = -1 };
	int samples = 1000, doorbells = 512, i, r;
	struct probe p = { .owner = -1 };
	const char *why;
	char err[256];

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--samples"))
			samples = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--doorbells"))
			doorbells = atoi(argv[i + 1]);
		else
			break;
	}
	if (i != argc || samples < 1 || doorbells < 1 || doorbells > 1000) {
		fprintf(stderr, "usage: %s [--samples N] [--doorbells 1..1000]\n", argv[0]);
		return 2;
	}
	why = kit_hsa_driver.absent();
	if (why) {
		fprintf(stderr, "kfdp-hw-probe: skip: %s\n", why);
		return 4;
	}
	p.owner = open("/dev/kfd_preempt", O_RDWR | O_CLOEXEC);
	r = p.owner < 0 ? -errno : kit_hsa_driver.open(&t);
	if (!r)
		r = kit_attach(p.owner, &t);
	if (r < 0) {
		fprintf(stderr, "kfdp-hw-probe: setting up: %s\n", strerror(-r));
		return 1;
	}
	p.handle = r;
	p.g = kit_hsa_gpu(&t);
	if (kit_gpu_kernel(p.g, "stamp", &p.stamp, err, sizeof(err))) {
		fprintf(stderr, "kfdp-hw-probe: %s\n", err);
		return 1;
	}
	p.stamps = kit_gpu_alloc(p.g, 64 * sizeof(*p.stamps));
	printf("{\n  \"schema\": \"kfdp-hw-probe/1\",\n  \"gpu\": \"%s\",\n  \"target\": \"%s\",\n",
	       p.g->product, p.g->target);
	r = p.stamps ? rptr_writeback(&p, samples) : -ENOMEM;
	if (!r)
		r = doorbells_while_preempted(&p, doorbells);
	printf("  \"%s\": \"%s\"\n}\n", "error", r ? strerror(r < 0 ? -r : r) : "");
	kit_gpu_kernel_free(&p.stamp);
	close(p.owner);
	kit_hsa_driver.close(&t);
	return r ? 1 : 0;
}
