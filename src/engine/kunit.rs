// SPDX-License-Identifier: GPL-2.0

//! The engine's KUnit suite (`kfdp_engine`), over the mock backend
//! [`crate::backend::mock`]: validation, duplicates, owners, leases,
//! VALIDATE_ONLY, ALL_OR_NOTHING, freezes, close and statistics, without
//! amdkfd.

use kernel::prelude::*;

#[kunit_tests(kfdp_engine)]
mod tests {
    use kernel::prelude::*;

    use crate::{
        backend::{
            mock::Mock,
            Applied,
            Backend,
            FreezeOp,
            Op, //
        },
        engine::owner::Owner,
        engine::registry::{
            QueueKey,
            REGISTRY, //
        },
        uapi::{
            kfdp_attach,
            kfdp_freeze,
            kfdp_queue_ref,
            KFDP_BATCH_ALL_OR_NOTHING,
            KFDP_BATCH_VALIDATE_ONLY,
            KFDP_R_ALREADY,
            KFDP_TARGET_KFD_FD, //
        },
    };

    const GPU: u32 = 0x1002;

    fn world(procs: &[(u64, u32)]) -> Result<Mock> {
        let m = Mock::new()?;
        for &(key, nq) in procs {
            m.add_proc(key, GPU, nq)?;
        }
        Ok(m)
    }

    fn attach(o: &Owner<Mock>, key: u64) -> Result<u32> {
        let mut a = kfdp_attach {
            kind: KFDP_TARGET_KFD_FD,
            fd: key as i32,
            ..Default::default()
        };
        o.attach(&mut a, || false)?;
        Ok(a.handle)
    }

    fn refs(handle: u32, queues: &[u32]) -> Result<KVec<kfdp_queue_ref>> {
        let mut v = KVec::new();
        for &queue_id in queues {
            v.push(
                kfdp_queue_ref {
                    handle,
                    gpu_id: GPU,
                    queue_id,
                    status: 99,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(v)
    }

    fn run<B: Backend>(
        o: &Owner<B>,
        op: Op,
        flags: u32,
        lease_ms: u32,
        e: &mut [kfdp_queue_ref],
    ) -> Applied {
        o.sweep();
        let mut guard = o.state.lock();
        let state = &mut *guard;
        o.run_batch(state, op, flags, lease_ms, e)
    }

    fn statuses(e: &[kfdp_queue_ref]) -> KVec<i32> {
        let mut v = KVec::new();
        for x in e {
            let _ = v.push(x.status, GFP_KERNEL);
        }
        v
    }

    #[test]
    fn batch_is_one_update_and_resume_restores() -> Result {
        let m = world(&[(101, 8), (102, 8)])?;
        let o = Owner::new(m.clone(), false)?;
        let (h1, h2) = (attach(&o, 101)?, attach(&o, 102)?);
        let mut e = refs(h1, &[0, 1, 2, 3, 4, 5, 6, 7])?;
        e.extend_from_slice(&refs(h2, &[0, 1, 2, 3, 4, 5, 6, 7])?, GFP_KERNEL)?;
        let a = run(&o, Op::Preempt, 0, 0, &mut e);
        assert_eq!(a.runlist_updates, 1);
        assert!(e.iter().all(|x| x.status == 0));
        assert_eq!(m.active(101) + m.active(102), 0);
        let a = run(&o, Op::Resume, 0, 0, &mut e);
        assert_eq!(a.runlist_updates, 1);
        assert_eq!(m.active(101) + m.active(102), 16);
        o.close();
        Ok(())
    }

    #[test]
    fn entries_are_validated() -> Result {
        let m = world(&[(111, 2)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 111)?;
        let mut e = refs(h, &[0, 1024, 1])?;
        e[2].gpu_id = 0;
        e.extend_from_slice(&refs(h + 7, &[0])?, GFP_KERNEL)?;
        let a = run(&o, Op::Preempt, 0, 0, &mut e);
        let einval = EINVAL.to_errno();
        assert_eq!(&statuses(&e)[..], &[0, einval, einval, einval]);
        assert_eq!(a.runlist_updates, 1);
        assert_eq!(m.active(111), 1);
        o.close();
        Ok(())
    }

    #[test]
    fn duplicates_are_already() -> Result {
        let m = world(&[(121, 2)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 121)?;
        let mut e = refs(h, &[1, 0, 1, 1])?;
        let a = run(&o, Op::Preempt, 0, 0, &mut e);
        let already = KFDP_R_ALREADY as i32;
        assert_eq!(&statuses(&e)[..], &[0, 0, already, already]);
        assert_eq!(a.runlist_updates, 1);
        // Preempting again what we hold is ALREADY too, and costs nothing.
        let a = run(&o, Op::Preempt, 0, 0, &mut e[..1]);
        assert_eq!(e[0].status, already);
        assert_eq!(a.runlist_updates, 0);
        o.close();
        Ok(())
    }

    #[test]
    fn owners_are_isolated() -> Result {
        let m = world(&[(131, 2)])?;
        let a = Owner::new(m.clone(), false)?;
        let b = Owner::new(m.clone(), false)?;
        let (ha, hb) = (attach(&a, 131)?, attach(&b, 131)?);
        let mut ea = refs(ha, &[0])?;
        run(&a, Op::Preempt, 0, 0, &mut ea);
        assert_eq!(ea[0].status, 0);
        let key = QueueKey {
            target: 131,
            gpu_id: GPU,
            queue_id: 0,
        };
        assert_eq!(REGISTRY.lock().mark_owner(&key), Some(a.id));
        // B can neither take nor resume A's preemption.
        let mut eb = refs(hb, &[0])?;
        run(&b, Op::Preempt, 0, 0, &mut eb);
        assert_eq!(eb[0].status, EBUSY.to_errno());
        run(&b, Op::Resume, 0, 0, &mut eb);
        assert_eq!(eb[0].status, EBUSY.to_errno());
        assert_eq!(m.active(131), 1);
        // B closing changes nothing of A's; A closing resumes.
        b.close();
        assert_eq!(m.active(131), 1);
        a.close();
        assert_eq!(m.active(131), 2);
        assert_eq!(REGISTRY.lock().mark_owner(&key), None);
        Ok(())
    }

    #[test]
    fn validate_only_changes_nothing() -> Result {
        let m = world(&[(141, 2)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 141)?;
        let mut e = refs(h, &[0, 5])?;
        let a = run(&o, Op::Preempt, KFDP_BATCH_VALIDATE_ONLY, 0, &mut e);
        assert_eq!(&statuses(&e)[..], &[0, ENOENT.to_errno()]);
        assert_eq!(a.runlist_updates, 0);
        assert_eq!(m.active(141), 2);
        assert!(o.state.lock().marks.len() == 0);
        o.close();
        Ok(())
    }

    #[test]
    fn all_or_nothing_changes_nothing_on_error() -> Result {
        let m = world(&[(151, 2)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 151)?;
        let mut e = refs(h, &[0, 1, 9])?;
        run(&o, Op::Preempt, KFDP_BATCH_ALL_OR_NOTHING, 0, &mut e);
        let c = crate::compat::ecanceled().to_errno();
        assert_eq!(&statuses(&e)[..], &[c, c, ENOENT.to_errno()]);
        assert_eq!(m.active(151), 2);
        let mut e = refs(h, &[0, 1])?;
        run(&o, Op::Preempt, KFDP_BATCH_ALL_OR_NOTHING, 0, &mut e);
        assert_eq!(&statuses(&e)[..], &[0, 0]);
        assert_eq!(m.active(151), 0);
        o.close();
        Ok(())
    }

    #[test]
    fn close_resumes_and_thaws_everything() -> Result {
        let m = world(&[(161, 3), (162, 1)])?;
        let o = Owner::new(m.clone(), false)?;
        let (h1, h2) = (attach(&o, 161)?, attach(&o, 162)?);
        let mut e = refs(h1, &[0, 1, 2])?;
        run(&o, Op::Preempt, 0, 0, &mut e);
        for _ in 0..2 {
            let mut f = kfdp_freeze {
                handle: h2,
                ..Default::default()
            };
            o.freeze(&mut f, FreezeOp::Freeze)?;
            assert_eq!(f.status, 0);
        }
        assert!(REGISTRY.lock().frozen(162, GPU));
        assert_eq!(m.active(161) + m.active(162), 0);
        o.close();
        assert_eq!(m.active(161) + m.active(162), 4);
        assert!(!REGISTRY.lock().frozen(162, GPU));
        assert!(m.world.lock().procs.iter().all(|p| p.frozen == 0));
        Ok(())
    }

    /// A FREEZE of every node that is too soon on one of them changes
    /// nothing: the nodes it froze first are thawed again.
    #[test]
    fn freeze_too_soon_on_one_node_changes_nothing() -> Result {
        const GPU2: u32 = 0x2002;
        let m = world(&[(191, 2)])?;
        m.add_proc(191, GPU2, 1)?;
        m.world.lock().freeze_too_soon = Some(GPU2);
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 191)?;
        let mut f = kfdp_freeze {
            handle: h,
            ..Default::default()
        };
        o.freeze(&mut f, FreezeOp::Freeze)?;
        assert_eq!(f.status, EAGAIN.to_errno());
        assert!(m.world.lock().procs.iter().all(|p| p.frozen == 0));
        assert!(!REGISTRY.lock().frozen(191, GPU));
        assert_eq!(m.active(191), 3);
        // Nothing is held, so there is nothing to thaw.
        let mut t = kfdp_freeze {
            handle: h,
            ..Default::default()
        };
        assert_eq!(o.freeze(&mut t, FreezeOp::Thaw), Err(EINVAL));
        o.close();
        Ok(())
    }

    #[test]
    fn thaw_needs_a_freeze_of_this_owner() -> Result {
        let m = world(&[(171, 1)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 171)?;
        let mut f = kfdp_freeze {
            handle: h,
            ..Default::default()
        };
        assert_eq!(o.freeze(&mut f, FreezeOp::Thaw), Err(EINVAL));
        f.flags = 1;
        assert_eq!(o.freeze(&mut f, FreezeOp::Freeze), Err(EINVAL));
        o.close();
        Ok(())
    }

    #[test]
    fn lease_expiry_resumes() -> Result {
        let m = world(&[(181, 2)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 181)?;
        let mut e = refs(h, &[0])?;
        run(&o, Op::Preempt, 0, 1, &mut e);
        let mut e2 = refs(h, &[1])?;
        run(&o, Op::Preempt, 0, 0, &mut e2);
        assert_eq!(m.active(181), 0);
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(3));
        o.housekeep();
        // The leased queue is back; the one without a lease stays off.
        assert_eq!(m.active(181), 1);
        assert_eq!(o.state.lock().stats.leases_expired, 1);
        assert_eq!(o.state.lock().marks.len(), 1);
        o.close();
        Ok(())
    }

    /// A lease ends on a node that cannot resume (EIO, the queue stays
    /// off): housekeeping tries again later each time, up to SWEEP_MS,
    /// rather than every millisecond; once the node resumes, it stops.
    /// Before the backoff this asked again after 1 ms every time. A lease
    /// that has not ended is still served on time: the backoff of the
    /// stuck one does not delay it.
    #[test]
    fn failing_lease_resumes_back_off() -> Result {
        use crate::engine::owner::SWEEP_MS;
        let m = world(&[(241, 2)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 241)?;
        let mut e = refs(h, &[0])?;
        run(&o, Op::Preempt, 0, 1, &mut e);
        m.world.lock().fail_resumes = true;
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(3));
        let mut waits = KVec::new();
        for _ in 0..9 {
            waits.push(o.housekeep().unwrap_or(0), GFP_KERNEL)?;
        }
        assert_eq!(&waits[..], &[1, 2, 4, 8, 16, 32, 64, SWEEP_MS, SWEEP_MS]);
        assert_eq!(m.active(241), 1);
        // A second queue with a 50 ms lease: the stuck one's 100 ms
        // backoff must not make it wait longer than its lease.
        let mut e2 = refs(h, &[1])?;
        run(&o, Op::Preempt, 0, 50, &mut e2);
        let next = o.housekeep().unwrap_or(0);
        assert!((1..=50).contains(&next));
        m.world.lock().fail_resumes = false;
        run(&o, Op::Resume, 0, 0, &mut e2);
        assert_eq!(o.housekeep(), Some(SWEEP_MS));
        assert_eq!(m.active(241), 2);
        assert_eq!(o.state.lock().lease_retry_ms, 0);
        o.close();
        Ok(())
    }

    #[test]
    fn exited_target_is_unpinned() -> Result {
        let m = world(&[(191, 2)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 191)?;
        let mut e = refs(h, &[0])?;
        run(&o, Op::Preempt, 0, 0, &mut e);
        m.world.lock().procs[0].alive = false;
        o.housekeep();
        assert!(o.state.lock().attachments[0].target.is_none());
        assert!(o.state.lock().marks.len() == 0);
        run(&o, Op::Resume, 0, 0, &mut e);
        assert_eq!(e[0].status, ESRCH.to_errno());
        o.close();
        Ok(())
    }

    #[test]
    fn same_process_same_handle_and_detach() -> Result {
        let m = world(&[(201, 2)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 201)?;
        assert_ne!(h, 0);
        assert_eq!(attach(&o, 201)?, h);
        let mut e = refs(h, &[0, 1])?;
        run(&o, Op::Preempt, 0, 0, &mut e);
        o.detach(&crate::uapi::kfdp_detach {
            handle: h,
            ..Default::default()
        })?;
        assert_eq!(m.active(201), 2);
        run(&o, Op::Resume, 0, 0, &mut e);
        assert_eq!(e[0].status, EINVAL.to_errno());
        o.close();
        Ok(())
    }

    #[test]
    fn statistics_count_what_happened() -> Result {
        let m = world(&[(211, 4)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 211)?;
        let mut e = refs(h, &[0, 1, 2, 3])?;
        run(&o, Op::Preempt, 0, 0, &mut e);
        run(&o, Op::Resume, 0, 0, &mut e[..2]);
        let s = o.state.lock().stats;
        assert_eq!(s.batches, 2);
        assert_eq!(s.queues_preempted, 4);
        assert_eq!(s.queues_resumed, 2);
        assert_eq!(s.runlist_updates, 2);
        o.close();
        Ok(())
    }

    #[test]
    fn pid_attach_rules() -> Result {
        let m = world(&[(221, 1)])?;
        let off = Owner::new(m.clone(), false)?;
        let on = Owner::new(m.clone(), true)?;
        // The header's fd for a PID attach is -1; 0 is a descriptor.
        let mut zero_fd = kfdp_attach {
            kind: crate::uapi::KFDP_TARGET_PID,
            pid: 221,
            ..Default::default()
        };
        assert_eq!(on.attach(&mut zero_fd, || true), Err(EINVAL));
        let mut a = kfdp_attach {
            kind: crate::uapi::KFDP_TARGET_PID,
            fd: -1,
            pid: 221,
            ..Default::default()
        };
        assert_eq!(
            off.attach(&mut a, || true),
            Err(crate::compat::eopnotsupp())
        );
        assert_eq!(on.attach(&mut a, || false), Err(EPERM));
        assert_eq!(on.attach(&mut a, || true), Ok(()));
        // An fd attach never asks (capable() marks and audits the task).
        let mut fd = kfdp_attach {
            kind: KFDP_TARGET_KFD_FD,
            fd: 221,
            ..Default::default()
        };
        let asked = core::cell::Cell::new(false);
        assert_eq!(
            on.attach(&mut fd, || {
                asked.set(true);
                true
            }),
            Ok(())
        );
        assert!(!asked.get());
        off.close();
        on.close();
        Ok(())
    }

    /// Close without memory for one list of every mark still resumes them
    /// all, in batches on the stack. Before, the list was collected until
    /// a push failed and the marks past it stayed suspended with no owner.
    #[test]
    fn resume_without_memory_leaves_no_mark() -> Result {
        let m = world(&[(241, 70), (242, 3)])?;
        let o = Owner::new(m.clone(), false)?;
        let (h1, h2) = (attach(&o, 241)?, attach(&o, 242)?);
        let ids: KVec<u32> = {
            let mut v = KVec::new();
            for q in 0..70 {
                v.push(q, GFP_KERNEL)?;
            }
            v
        };
        let mut e = refs(h1, &ids)?;
        e.extend_from_slice(&refs(h2, &[0, 1, 2])?, GFP_KERNEL)?;
        run(&o, Op::Preempt, 0, 0, &mut e);
        assert!(e.iter().all(|x| x.status == 0));
        assert_eq!(m.active(241) + m.active(242), 0);
        // Only h1's marks: more than two chunks' worth, h2's untouched.
        let done = {
            let mut st = o.state.lock();
            o.resume_marks_in_chunks(&mut st, |mk| mk.handle == h1)
        };
        assert_eq!(done, 70);
        assert_eq!((m.active(241), m.active(242)), (70, 0));
        assert_eq!(o.state.lock().marks.len(), 3);
        o.close();
        assert_eq!(m.active(242), 3);
        Ok(())
    }

    /// A queue this batch marked whose mark cannot be recorded (the
    /// registry out of memory) is resumed, once the registry's lock is
    /// dropped: its entry says ENOMEM, no mark of it is left on either
    /// side, and the rest of the batch holds.
    #[test]
    fn a_mark_that_cannot_be_recorded_is_undone() -> Result {
        let m = world(&[(261, 3)])?;
        let o = Owner::new(m.clone(), false)?;
        let h = attach(&o, 261)?;
        let mut e = refs(h, &[0, 1, 2])?;
        REGISTRY.lock().failing_claims = 1;
        run(&o, Op::Preempt, 0, 0, &mut e);
        REGISTRY.lock().failing_claims = 0;
        assert_eq!(e[0].status, ENOMEM.to_errno());
        assert!(e[1].status == 0 && e[2].status == 0);
        // Queue 0 runs again; 1 and 2 stay preempted, marked by `o` alone.
        assert_eq!(m.active(261), 1);
        assert_eq!(o.state.lock().marks.len(), 2);
        let owner = |queue_id| {
            REGISTRY.lock().mark_owner(&QueueKey {
                target: 261,
                gpu_id: GPU,
                queue_id,
            })
        };
        assert_eq!(
            (owner(0), owner(1), owner(2)),
            (None, Some(o.id), Some(o.id))
        );
        // With memory, the same queue is taken and recorded.
        let mut again = refs(h, &[0])?;
        run(&o, Op::Preempt, 0, 0, &mut again);
        assert_eq!(again[0].status, 0);
        assert_eq!((m.active(261), owner(0)), (0, Some(o.id)));
        o.close();
        assert_eq!(m.active(261), 3);
        assert_eq!(owner(1), None);
        Ok(())
    }

    /// A batch over both backends of the mux (amdkfd and simulated nodes in
    /// the module; two mocks here) where the second part cannot be
    /// allocated: nothing may change on either side. Before the mux built
    /// both parts first, the first was applied and then reported ENOMEM,
    /// and its queues stayed preempted without a mark.
    #[test]
    fn mixed_batch_without_memory_changes_nothing() -> Result {
        use crate::{
            backend::mux::Mux,
            uapi::KFDP_TARGET_SIM_FD, //
        };
        let (kfd, sim) = (world(&[(231, 2)])?, world(&[(232, 2)])?);
        let mux = Mux::new(kfd.clone(), Some(sim.clone()));
        mux.fail_sim_part(true);
        let o = Owner::new(mux, false)?;
        let mut handles = [0u32; 2];
        for (h, (kind, fd)) in handles
            .iter_mut()
            .zip([(KFDP_TARGET_KFD_FD, 231), (KFDP_TARGET_SIM_FD, 232)])
        {
            let mut a = kfdp_attach {
                kind,
                fd,
                ..Default::default()
            };
            o.attach(&mut a, || false)?;
            *h = a.handle;
        }
        let mut e = refs(handles[0], &[0, 1])?;
        e.extend_from_slice(&refs(handles[1], &[0, 1])?, GFP_KERNEL)?;
        run(&o, Op::Preempt, 0, 0, &mut e);
        assert!(e.iter().all(|x| x.status == ENOMEM.to_errno()));
        assert_eq!((kfd.active(231), sim.active(232)), (2, 2));
        assert!(o.state.lock().marks.len() == 0);
        // With memory, the same batch takes both sides in one update each.
        o.backend.fail_sim_part(false);
        let a = run(&o, Op::Preempt, 0, 0, &mut e);
        assert!(e.iter().all(|x| x.status == 0));
        assert_eq!(
            (a.runlist_updates, kfd.active(231), sim.active(232)),
            (2, 0, 0)
        );
        o.close();
        assert_eq!((kfd.active(231), sim.active(232)), (2, 2));
        Ok(())
    }
}
