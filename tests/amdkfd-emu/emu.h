/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfdp_amdkfd_emu: amdkfd's own queue manager behind an emulated CP/HWS.
 *
 * A test-only module (never part of kfd_preempt.ko) that links amdkfd's
 * real queue-management sources (kfd_device_queue_manager*.c,
 * kfd_packet_manager*.c, kfd_mqd_manager*.c, kfd_kernel_queue.c,
 * kfd_queue.c) with kfd_preempt's real glue, replaces only the amdgpu and
 * kfd functions they call (emu_stubs.c, emu_mem.c), and answers the HIQ with
 * an emulated HWS that decodes the PM4 amdkfd writes (emu_hws.c). The KUnit
 * suites (emu_glue_test.c) drive the glue and assert on what the emulated
 * firmware saw (Documentation/testing.rst, "amdkfd under emulation").
 */
#ifndef KFDP_EMU_H
#define KFDP_EMU_H

#include <linux/types.h>

#include "kfd_priv.h"
#include "kfd_device_queue_manager.h"
#include "kfd_topology.h"
#include "amdgpu_reset.h"

#include "kfdp_glue_priv.h"

#define EMU_MAX_NODES		4
#define EMU_MAX_MAPPED		256
#define EMU_MAX_QUEUES		16

/* A queue the emulated firmware has mapped (from a runlist's MAP_QUEUES). */
struct emu_mapped {
	u64 mqd_addr;
	u32 doorbell_off;
	u16 pasid;
	bool is_static;
};

/*
 * struct emu_hws - the emulated CP/HWS of one node.
 *
 * Everything it learns comes from what amdkfd hands to "hardware": the HIQ
 * MQD at hiq_mqd_load() and the packets behind the HIQ doorbell. It runs
 * synchronously in the doorbell write, i.e. under amdkfd's pm->lock and
 * usually dqm_lock, so it never calls back into amdkfd.
 */
struct emu_hws {
	/* Learnt at hiq_mqd_load() (firmware start). */
	struct v9_mqd *hiq_mqd;
	u32 *ring;
	u32 ring_dw;
	u32 *rptr;
	u64 consumed;		/* dwords consumed since the HIQ load */
	bool hung;		/* garbage on the HIQ: consumes nothing more */

	/* The firmware's view: the current runlist's queues. */
	struct emu_mapped mapped[EMU_MAX_MAPPED];
	unsigned int n_mapped;
	bool runlist_active;

	/* What it was asked, counted. */
	unsigned int hiq_loads;
	unsigned int set_resources;
	unsigned int runlists;
	unsigned int unmaps;
	unsigned int unmaps_reset;	/* UNMAP_QUEUES with action reset */
	unsigned int query_status;
	unsigned int map_process;
	unsigned int map_queues;
	unsigned int chained;
	unsigned int write_data;
	/* MES nodes (emu_mes.c): one call per queue. */
	unsigned int mes_adds;
	unsigned int mes_removes;
	unsigned int mes_add_failures;	/* adds refused by the fault below */
	/* Protocol violations: each must stay 0. */
	unsigned int errors;

	/* Faults, each consumed by the next packet it applies to. */
	bool drop_next_fence;		/* QUERY_STATUS writes no fence */
	u32 fail_next_unmap_doorbell;	/* report it in queue_doorbell_id0 */
	u32 fail_next_add_doorbell;	/* MES refuses that queue's next add */
	u64 hung_queue_address;		/* what hqd_get_pq_addr() returns */
	u32 hung_pipe, hung_queue;
	bool hqd_reset_fails;
};

/*
 * struct emu_node - one fake GC 9.4.3 (MI300) partition in HWS mode,
 * brought up through amdkfd's own device_queue_manager_init() and start.
 */
struct emu_node {
	struct amdgpu_device *adev;		/* kvzalloc: ~480 KiB */
	struct amdgpu_reset_domain reset_domain;
	struct kfd_dev kfd;
	struct kfd_node node;
	struct kfd_topology_device topo;
	struct kfd2kgd_calls kfd2kgd;
	struct device *dev;
	u64 hiq_doorbell;			/* the "MMIO" slot */
	struct emu_hws hws;
	/* amdgpu entry points amdkfd called, counted (emu_stubs.c). */
	unsigned int gpu_resets;
	unsigned int reset_events;
	bool fed;				/* amdgpu_amdkfd_is_fed() */
};

/* One KFD process with a pdd on one node and its queues. */
struct emu_proc {
	struct kfd_process *p;
	struct kfd_process_device *pdd;
	struct emu_node *en;
	struct drm_file *drm_file;
	struct amdgpu_fpriv *fpriv;
	struct kfdp_target t;
	struct queue *q[EMU_MAX_QUEUES];
	unsigned int nq;
};

/* emu_node.c */
struct emu_node *emu_node_create(u32 gpu_id, u32 xcc_mask, bool mes);
void emu_node_destroy(struct emu_node *en);
struct emu_node *emu_node_of_adev(struct amdgpu_device *adev);
struct emu_node *emu_node_of_kfd(struct kfd_dev *kfd);
struct emu_node *emu_node_of_gpu_id(u32 gpu_id);
struct emu_proc *emu_proc_create(struct emu_node *en, u16 pasid);
void emu_proc_destroy(struct emu_proc *ep);
void emu_proc_exit(struct emu_proc *ep);
int emu_queue_create(struct emu_proc *ep, u32 queue_id);
int emu_queue_destroy(struct emu_proc *ep, unsigned int idx);
int emu_queue_set_percent(struct emu_proc *ep, unsigned int idx, u32 percent);
int emu_queue_update(struct emu_proc *ep, unsigned int idx, struct mqd_update_info *minfo);
int emu_node_reset(struct emu_node *en);
unsigned int emu_count_active(struct emu_node *en);

/* emu_debugger.c, compiled within amdkfd's kfd_device_queue_manager.c */
int emu_debugger_suspend(struct kfd_process_device *pdd, struct queue *q);
void emu_queue_set_reset(struct kfd_process_device *pdd, struct queue *q);

/* emu_hws.c */
void emu_hws_load_hiq(struct emu_node *en, struct v9_mqd *mqd);
void emu_hws_doorbell(struct emu_node *en, u64 wptr);
bool emu_hws_is_mapped(struct emu_node *en, const struct queue *q);

/* emu_mem.c: the fake GART */
void *emu_gart_to_cpu(u64 gpu_addr, size_t len);
void emu_mem_fail_next(unsigned int n);
unsigned int emu_mem_live(void);
void emu_mem_cleanup(void);

/* emu_cov.c: the hooks of -finstrument-functions, and the report. */
void __cyg_profile_func_enter(void *fn, void *site);
void __cyg_profile_func_exit(void *fn, void *site);
void emu_cov_report(void);

/* emu_mes.c */
extern const struct amdgpu_mes_funcs emu_mes_funcs;

/* emu_stubs.c */
extern const struct kfd2kgd_calls emu_kfd2kgd;

#endif /* KFDP_EMU_H */
