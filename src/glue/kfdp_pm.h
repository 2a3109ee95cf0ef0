/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Implemented in Rust (src/engine/pm.rs), called by the glue's PM notifier
 * (kfdp_pm.c). Not given to bindgen: Rust defines these, it does not call
 * them.
 */
#ifndef KFDP_PM_H
#define KFDP_PM_H

/* PM_HIBERNATION_PREPARE: 0, or a negative errno that aborts hibernation. */
int kfdp_pm_hibernation_prepare(void);
/* PM_POST_HIBERNATION. */
void kfdp_pm_hibernation_done(void);

#endif /* KFDP_PM_H */
