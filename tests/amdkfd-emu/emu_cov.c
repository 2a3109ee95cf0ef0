// SPDX-License-Identifier: GPL-2.0
/*
 * Which of amdkfd's functions the suites executed: with KFDP_EMU_COVERAGE=1
 * (scripts/amdkfd-coverage.sh) amdkfd's objects are built with
 * -finstrument-functions, every function entry lands here, and unloading
 * the module prints each function entered once, by name. Without it
 * nothing calls these and the module prints nothing.
 */

#include <linux/atomic.h>
#include <linux/hash.h>
#include <linux/kernel.h>

#include "emu.h"

#define EMU_COV_SLOTS 4096

static unsigned long emu_cov_slots[EMU_COV_SLOTS];
static atomic_t emu_cov_used = ATOMIC_INIT(0);

/* Lock-free: it runs inside amdkfd's own locks, on any CPU. */
void notrace __cyg_profile_func_enter(void *fn, void *site)
{
	unsigned long a = (unsigned long)fn;
	unsigned int i = hash_long(a, ilog2(EMU_COV_SLOTS)), n;

	for (n = 0; n < EMU_COV_SLOTS; n++, i = (i + 1) % EMU_COV_SLOTS) {
		unsigned long seen = READ_ONCE(emu_cov_slots[i]);

		if (seen == a)
			return;
		if (!seen && !cmpxchg(&emu_cov_slots[i], 0, a)) {
			atomic_inc(&emu_cov_used);
			return;
		}
		if (READ_ONCE(emu_cov_slots[i]) == a)
			return;
	}
}

void notrace __cyg_profile_func_exit(void *fn, void *site)
{
}

/* Module exit: one line per function entered, for the coverage script. */
void emu_cov_report(void)
{
	unsigned int i;

	if (!atomic_read(&emu_cov_used))
		return;
	pr_info("kfdp_emu_cov: %d functions entered\n", atomic_read(&emu_cov_used));
	for (i = 0; i < EMU_COV_SLOTS; i++)
		if (emu_cov_slots[i])
			pr_info("kfdp_emu_cov: %ps\n", (void *)emu_cov_slots[i]);
}
