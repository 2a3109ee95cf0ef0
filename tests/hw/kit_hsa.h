/* SPDX-License-Identifier: GPL-2.0 */
/* What the hardware-only checks reach of the "hsa" driver's tenants. */
#ifndef KIT_HSA_H
#define KIT_HSA_H

#include "gpu.h"
#include "kit.h"

/* The tenant's GPU (after a successful open). */
struct kit_gpu *kit_hsa_gpu(struct kit_tenant *t);
/* The HSA queue behind a spinning queue. */
hsa_queue_t *kit_hsa_queue(struct kit_queue *q);
/* Fills @q's identity from the attached queue whose ring is @ring_base. */
int kit_hsa_identify(int owner, __u32 handle, const void *ring_base, struct kit_queue *q);

#endif /* KIT_HSA_H */
