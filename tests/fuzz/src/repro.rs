// SPDX-License-Identifier: GPL-2.0

//! A failing program as a C reproducer: [`crate::exec::Context`] records,
//! while it replays the program once, each system call it makes as C, with
//! the values earlier calls returned (fds, handles, queue and gpu ids)
//! named as variables, so that the C does the same on a fresh boot even
//! where the kernel hands out other numbers. Calls a forked child or a
//! second thread made are listed in a comment (the replay script runs them).

use std::collections::HashMap;

use crate::program::Ptr;

/// What kind of value a name stands for.
#[derive(Clone, Copy, Hash, PartialEq, Eq)]
pub enum Kind {
    Fd,
    Handle,
    Queue,
    Gpu,
    Pid,
}

/// The C being written, and the names of the values returned so far.
#[derive(Default)]
pub struct Rec {
    body: String,
    names: HashMap<(Kind, u64), String>,
    /// The `struct ring` of each ring queue, by queue_id.
    pub rings: HashMap<u32, String>,
    /// Children the C has forked (`kids[]`).
    pub kids: usize,
    /// The fault knobs the C set, reset before its files are closed.
    pub knobs: Vec<String>,
    count: usize,
}

/// The C every reproducer starts with: buffers that end at a guard page,
/// the pointer kinds, and a report of each call's result.
const PROLOGUE: &str = r#"// SPDX-License-Identifier: GPL-2.0
// A kfdp-fuzz reproducer: run as root on a kernel with kfd_preempt loaded
// with sim_nodes=4 sim_mes_nodes=10 pid_attach=1, debugfs mounted; then
// read the oracles (debugfs kfd_preempt/stats, attachments, sim/status)
// and dmesg. Build: cc -I<kfd_preempt>/uapi -o repro repro.c
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/kfd_preempt.h>

#define PTR_GOOD 0
#define PTR_NULL 1
#define PTR_MISALIGNED 2
#define PTR_UNMAPPED 3
#define PTR_KERNEL 4
#define PTR_READ_ONLY 5
#define PTR_SHORT 6

/* len bytes, 64-byte aligned, ending near an unmapped guard page */
static inline char *gbuf(size_t len, char **guard)
{
	size_t pages = (len + 72 + 4095) / 4096 + 1;
	char *m = mmap(NULL, pages * 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return NULL;
	*guard = m + (pages - 1) * 4096;
	mprotect(*guard, 4096, PROT_NONE);
	return (char *)((unsigned long)(*guard - len - 8) & ~63UL);
}

static inline __u64 uptr(char *b, char *guard, int kind, unsigned int arg)
{
	static char *ro;

	switch (kind) {
	case PTR_NULL: return 0;
	case PTR_MISALIGNED: return (__u64)(unsigned long)b + arg;
	case PTR_UNMAPPED: return 0x1000;
	case PTR_KERNEL: return 0xffff888000000000ULL;
	case PTR_READ_ONLY:
		if (!ro)
			ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return (__u64)(unsigned long)ro;
	case PTR_SHORT:
		return (__u64)(unsigned long)guard - (arg < guard - b ? arg : guard - b);
	}
	return (__u64)(unsigned long)b;
}

static inline void knob(const char *path, unsigned int value)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fprintf(f, "%u\n", value);
		fclose(f);
	}
}

static inline int done(int line, const char *what, int r)
{
	printf("%3d %-28s %s\n", line, what, r < 0 ? strerror(errno) : "ok");
	return r;
}

static inline void put_ref(char *b, unsigned int i, unsigned int stride, __u32 handle,
		    __u32 gpu_id, __u32 queue_id, __s32 status)
{
	struct kfdp_queue_ref r = { handle, gpu_id, queue_id, status };

	memcpy(b + (size_t)i * stride, &r, sizeof(r));
}

struct ring {
	char *packets;
	volatile __u64 *read_index, *write_index;
	__u32 count;
	__u64 written;
};

static inline void ring_write(struct ring *r, int dispatches, __u64 work_ns)
{
	for (int i = 0; i < dispatches && r->count; i++) {
		struct kfdp_sim_packet p = { .header = KFDP_SIM_PKT_DISPATCH,
					     .work_ns = work_ns, .tag = r->written };

		if (r->written - *r->read_index >= r->count)
			break;
		memcpy(r->packets + (r->written % r->count) * sizeof(p), &p, sizeof(p));
		r->written++;
	}
	*r->write_index = r->written;
}

int main(void)
{
	pid_t kids[64];
	int nkids = 0;

"#;

const EPILOGUE: &str = r#"
	/* Everything is closed at exit; children are killed first. */
	for (int i = 0; i < nkids; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	return 0;
}
"#;

/// A pointer kind as the C helper takes it: (kind, argument).
fn ptr_kind(p: Ptr) -> (&'static str, u32) {
    match p {
        Ptr::Good => ("PTR_GOOD", 0),
        Ptr::Null => ("PTR_NULL", 0),
        Ptr::Misaligned(k) => ("PTR_MISALIGNED", u32::from(k.clamp(1, 7))),
        Ptr::Unmapped => ("PTR_UNMAPPED", 0),
        Ptr::Kernel => ("PTR_KERNEL", 0),
        Ptr::ReadOnly => ("PTR_READ_ONLY", 0),
        Ptr::Short(n) => ("PTR_SHORT", u32::from(n)),
    }
}

impl Rec {
    /// The value as C: the variable an earlier call returned it in, or the
    /// number.
    pub fn v(&self, kind: Kind, value: u64) -> String {
        match self.names.get(&(kind, value)) {
            Some(n) => n.clone(),
            None if kind == Kind::Fd => format!("{}", value as i32),
            None => format!("{value:#x}"),
        }
    }

    /// Names a value a call returned; returns the name.
    pub fn bind(&mut self, kind: Kind, value: u64, prefix: &str) -> String {
        self.count += 1;
        let name = format!("{prefix}{}", self.count);
        self.names.insert((kind, value), name.clone());
        name
    }

    /// Names `value` as `name` (a name [`Rec::bind`] made before the call
    /// returned it).
    pub fn rename(&mut self, kind: Kind, value: u64, name: &str) {
        self.names.retain(|_, n| n != name);
        self.names.insert((kind, value), name.to_string());
    }

    /// Appends lines of C (already indented by one tab).
    pub fn line(&mut self, s: &str) {
        for l in s.lines() {
            self.body.push('\t');
            self.body.push_str(l);
            self.body.push('\n');
        }
    }

    /// A buffer of `len` bytes, as the C helper makes it; returns its name.
    pub fn buf(&mut self, len: usize) -> String {
        self.count += 1;
        let b = format!("b{}", self.count);
        self.line(&format!("char *{b}_g, *{b} = gbuf({len}, &{b}_g);"));
        b
    }

    /// The user pointer `p` names for buffer `b`.
    pub fn ptr(&self, b: &str, p: Ptr) -> String {
        let (k, a) = ptr_kind(p);
        format!("uptr({b}, {b}_g, {k}, {a})")
    }

    /// An ioctl with a struct argument: its declaration with the given
    /// fields, the call and its report; returns the names of the struct and
    /// of the result.
    pub fn ioctl(
        &mut self,
        fd: &str,
        req: &str,
        st: &str,
        fields: &[(&str, String)],
    ) -> (String, String) {
        self.count += 1;
        let (a, r) = (format!("a{}", self.count), format!("r{}", self.count));
        let init: Vec<String> = fields.iter().map(|(f, v)| format!(".{f} = {v}")).collect();
        self.line(&format!("struct {st} {a} = {{ {} }};", init.join(", ")));
        self.line(&format!(
            "done(__LINE__, \"{req}\", ioctl({fd}, {req}, &{a}));"
        ));
        (a, r)
    }

    /// The whole reproducer.
    pub fn finish(mut self) -> String {
        let knobs = std::mem::take(&mut self.knobs);
        for k in knobs {
            self.line(&format!("knob(\"{k}\", 0);"));
        }
        format!("{PROLOGUE}{}{EPILOGUE}", self.body)
    }
}
