// SPDX-License-Identifier: GPL-2.0
/*
 * kfdp-hw-tenant: a tenant process for `kfdp-scenario bench --hardware`. It
 * creates --queues N queues running the spinning workload (on the GPU, or
 * with KFDP_HW_DRIVER=sim on the simulated node), prints
 * "ready pid=PID queues=N [rings=0xADDR,...]" and runs until its stdin
 * closes. On a GPU the ring addresses (QUERY's ring_base_address) tell the
 * bench which of the process's queues are the workload's: the runtime may
 * create queues of its own (a copy queue for code object uploads).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kit.h"
#include "kit_hsa.h"

int main(int argc, char **argv)
{
	const struct kit_driver *drv = kit_driver();
	struct kit_tenant t = { .drv = drv, .fd = -1 };
	struct kit_queue q[KIT_MAX_QUEUES];
	const char *why;
	int i, n = 1, r;
	char buf[64];

	if (argc == 3 && !strcmp(argv[1], "--queues"))
		n = atoi(argv[2]);
	if (argc != 1 && argc != 3) {
		fprintf(stderr, "usage: %s [--queues N]\n", argv[0]);
		return 2;
	}
	if (!drv) {
		fprintf(stderr, "kfdp-hw-tenant: KFDP_HW_DRIVER must be hsa or sim\n");
		return 2;
	}
	why = drv->absent();
	if (why) {
		fprintf(stderr, "kfdp-hw-tenant: %s\n", why);
		return 4;
	}
	if (n < 1 || n > KIT_MAX_QUEUES) {
		fprintf(stderr, "kfdp-hw-tenant: --queues must be 1 to %d\n", KIT_MAX_QUEUES);
		return 2;
	}
	r = drv->open(&t);
	for (i = 0; !r && i < n; i++)
		r = drv->spin(&t, -1, 0, &q[i]);
	if (r) {
		fprintf(stderr, "kfdp-hw-tenant: queue %d of %d: error %d\n", i, n, r);
		drv->close(&t);
		return 1;
	}
	printf("ready pid=%d queues=%d", (int)getpid(), n);
	for (i = 0; drv == &kit_hsa_driver && i < n; i++)
		printf("%s%p", i ? "," : " rings=", kit_hsa_queue(&q[i])->base_address);
	printf("\n");
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	drv->close(&t);
	return 0;
}
