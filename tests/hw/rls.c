// SPDX-License-Identifier: GPL-2.0
/*
 * kfd/rls: for each GPU node "Node N, gpu_id X:" then the runlist IB as
 * seq_hex_dump() prints it, 32-bit words in hex, or "No active runlist".
 * The IB is a stream of PM4 type-3 packets (header: type 3 in bits 31:30,
 * count of body dwords minus one in 29:16, opcode in 15:8); MAP_QUEUES
 * (0xA2, kfd_pm4_headers_ai.h) carries the queue's doorbell offset in bits
 * 27:2 of its third dword, the value amdkfd reports as doorbell_off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rls.h"

#define PM4_TYPE3 3u
#define PM4_MAP_QUEUES 0xA2u
#define RLS_MAX_WORDS (1 << 16)

int kit_rls_parse(FILE *f, __u32 gpu_id, __u32 doorbell_off)
{
	__u32 *words = malloc(RLS_MAX_WORDS * sizeof(*words));
	int in_node = 0, found_node = 0, r = 0;
	unsigned int n = 0, i;
	char line[512];

	if (!words)
		return -ENOMEM;
	while (fgets(line, sizeof(line), f)) {
		unsigned int node, id;
		char *p, *end;

		if (sscanf(line, "Node %u, gpu_id %x:", &node, &id) == 2) {
			if (in_node)
				break;
			in_node = id == gpu_id;
			found_node |= in_node;
			continue;
		}
		p = strchr(line, ':');
		if (!in_node || !p)
			continue;
		for (p++;; p = end) {
			unsigned long w = strtoul(p, &end, 16);

			if (end == p || n == RLS_MAX_WORDS)
				break;
			words[n++] = w;
		}
	}
	if (!found_node)
		r = -ENOENT;
	for (i = 0; !r && i < n;) {
		__u32 h = words[i], len = ((h >> 16) & 0x3fff) + 2;

		if (h == 0)	/* the rest of the IB is unused */
			break;
		if (h >> 30 != PM4_TYPE3 || i + len > n) {
			r = -EPROTO;
			break;
		}
		if (((h >> 8) & 0xff) == PM4_MAP_QUEUES && len >= 3 &&
		    ((words[i + 2] >> 2) & 0x3ffffff) == doorbell_off)
			r = 1;
		i += len;
	}
	free(words);
	return r;
}

int kit_rls_maps(__u32 gpu_id, __u32 doorbell_off)
{
	FILE *f = fopen(KIT_RLS, "r");
	int r;

	if (!f)
		return -errno;
	r = kit_rls_parse(f, gpu_id, doorbell_off);
	fclose(f);
	return r;
}
