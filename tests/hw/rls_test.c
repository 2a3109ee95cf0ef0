// SPDX-License-Identifier: GPL-2.0
/*
 * rls.c against amdkfd's own output. The amdkfd emulation's KUnit case
 * hws_runlist_debugfs_dump prints, into the VM's kernel log, what amdkfd's
 * pm_debugfs_runlist() writes to kfd/rls for a real runlist, and each
 * queue's doorbell offset with whether the emulated firmware maps it. This
 * runs the kit's parser on that dump and expects the same answers, plus
 * "not mapped" for a doorbell no queue has and -ENOENT for another node.
 *
 * usage: rls_test CONSOLE_LOG    (KTAP and "N passed, M failed")
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rls.h"

struct expect {
	unsigned int gpu_id, doorbell;
	int mapped;
};

/*
 * The text of a kernel log line: without its "[ time] " prefix and the
 * module's pr_fmt prefix (what preceded "kfdp-rls-begin", in @prefix).
 */
static const char *text(const char *line, const char *prefix)
{
	const char *p = line[0] == '[' ? strchr(line, ']') : NULL;

	p = p ? p + 2 : line;
	return strncmp(p, prefix, strlen(prefix)) ? p : p + strlen(prefix);
}

int main(int argc, char **argv)
{
	struct expect want[64];
	int n = 0, i, pass = 0, fail = 0, in = 0;
	char line[512], prefix[64] = "", *dump = NULL, *begin;
	size_t dump_len = 0;
	FILE *log, *d;

	log = argc == 2 ? fopen(argv[1], "r") : NULL;
	if (!log) {
		fprintf(stderr, "usage: rls_test CONSOLE_LOG\n");
		return 2;
	}
	d = open_memstream(&dump, &dump_len);
	while (d && fgets(line, sizeof(line), log)) {
		const char *t = text(line, prefix);

		begin = strstr(line, "kfdp-rls-begin");
		if (begin) {
			/* "[ time] amdgpu: kfdp-rls-begin": the prefix is "amdgpu: ". */
			t = text(line, "");
			snprintf(prefix, sizeof(prefix), "%.*s", (int)(begin - t), t);
			in = 1;
			continue;
		}
		if (!strncmp(t, "kfdp-rls-end", 12))
			in = 0;
		else if (in && n < 64 &&
			 sscanf(t, "kfdp-rls-expect %x %u %d", &want[n].gpu_id,
				&want[n].doorbell, &want[n].mapped) == 3)
			n++;
		else if (in)
			fputs(t, d);
	}
	fclose(log);
	if (!d || fclose(d) || n == 0) {
		printf("TAP version 13\n1..1\nnot ok 1 rls_dump_found # no kfdp-rls dump in %s\n",
		       argv[1]);
		printf("0 passed, 1 failed\n");
		return 1;
	}
	printf("TAP version 13\n1..%d\n", n + 2);
	for (i = 0; i <= n + 1; i++) {
		FILE *f = fmemopen(dump, dump_len, "r");
		unsigned int gpu = want[0].gpu_id, doorbell = 0x3ffffff;
		int expected = 0, got;

		if (i < n) {
			gpu = want[i].gpu_id;
			doorbell = want[i].doorbell;
			expected = want[i].mapped;
		} else if (i == n + 1) {
			gpu = want[0].gpu_id + 1;	/* a node the file lacks */
			expected = -ENOENT;
		}
		got = f ? kit_rls_parse(f, gpu, doorbell) : -ENOMEM;
		if (f)
			fclose(f);
		if (got == expected)
			pass++;
		else
			fail++;
		printf("%sok %d rls_gpu_%x_doorbell_%u # expected %d, parsed %d\n",
		       got == expected ? "" : "not ", i + 1, gpu, doorbell, expected, got);
	}
	free(dump);
	printf("%d passed, %d failed\n", pass, fail);
	return fail ? 1 : 0;
}
