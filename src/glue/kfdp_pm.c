// SPDX-License-Identifier: GPL-2.0
/*
 * The PM notifier behind src/engine/pm.rs (MQDs across hibernation:
 * Documentation/design.rst, "Named hazards"): hibernation is refused while
 * queues are held preempted or processes frozen, because amdkfd saves only
 * active queues' MQDs, which live in VRAM on MI300. The decision is the
 * engine's (Rust); this file only connects it to the PM core, which the
 * kernel crate has no abstraction for.
 */

#include <linux/notifier.h>
#include <linux/suspend.h>

#include "kfdp_glue.h"
#include "kfdp_pm.h"

static int kfdp_pm_event(struct notifier_block *nb, unsigned long event, void *unused)
{
	switch (event) {
	case PM_HIBERNATION_PREPARE:
		return notifier_from_errno(kfdp_pm_hibernation_prepare());
	case PM_POST_HIBERNATION:
		kfdp_pm_hibernation_done();
		return NOTIFY_OK;
	default:
		return NOTIFY_DONE;
	}
}

static struct notifier_block kfdp_pm_nb = {
	.notifier_call = kfdp_pm_event,
};

int kfdp_pm_register(void)
{
	return register_pm_notifier(&kfdp_pm_nb);
}

void kfdp_pm_unregister(void)
{
	unregister_pm_notifier(&kfdp_pm_nb);
}
