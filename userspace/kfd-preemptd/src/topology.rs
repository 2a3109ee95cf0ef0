//! The GPU nodes of this host, which `[[node]]` sections must name: KFD's
//! topology in sysfs, and the module's simulated nodes (whose gpu_ids its
//! debugfs `status` lists).

use std::{collections::BTreeSet, fs, path::Path};

/// The gpu_ids of the host under the sysfs root `sys` (`/sys`): every KFD
/// topology node with a non-zero `gpu_id` (a CPU node has 0), and every
/// simulated node of kfd_preempt. Empty if neither can be read.
///
/// ```
/// use kfd_preemptd::topology::host_gpu_ids;
///
/// // No such tree: nothing is known.
/// assert!(host_gpu_ids(std::path::Path::new("/nonexistent")).is_empty());
/// ```
pub fn host_gpu_ids(sys: &Path) -> BTreeSet<u32> {
    let mut ids = BTreeSet::new();
    if let Ok(nodes) = fs::read_dir(sys.join("class/kfd/kfd/topology/nodes")) {
        for node in nodes.flatten() {
            let id = fs::read_to_string(node.path().join("gpu_id"))
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok());
            if let Some(id) = id.filter(|&id| id != 0) {
                ids.insert(id);
            }
        }
    }
    if let Ok(status) = fs::read_to_string(sys.join("kernel/debug/kfd_preempt/sim/status")) {
        ids.extend(status.lines().filter_map(sim_gpu_id));
    }
    ids
}

/// The gpu_id of a simulated node's `status` line
/// (`node3 gpu_id 0x5103 mode hws ...`).
fn sim_gpu_id(line: &str) -> Option<u32> {
    let mut f = line.split_whitespace();
    let node = f.next()?;
    if !node.starts_with("node") || f.next()? != "gpu_id" {
        return None;
    }
    u32::from_str_radix(f.next()?.strip_prefix("0x")?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_nodes_of_the_topology_and_the_simulated_nodes() {
        let root = std::env::temp_dir().join(format!("kfdp-topology-{}", std::process::id()));
        let nodes = root.join("class/kfd/kfd/topology/nodes");
        for (n, id) in [(0, "0\n"), (1, "45163\n"), (2, "1234\n"), (3, "junk\n")] {
            fs::create_dir_all(nodes.join(n.to_string())).unwrap();
            fs::write(nodes.join(format!("{n}/gpu_id")), id).unwrap();
        }
        fs::create_dir_all(nodes.join("4")).unwrap(); // no gpu_id file
        let sim = root.join("kernel/debug/kfd_preempt/sim");
        fs::create_dir_all(&sim).unwrap();
        fs::write(
            sim.join("status"),
            "processes 0\nqueues 0\nnode0 gpu_id 0x5100 mode hws queues 0\n\
             node1 gpu_id 0x5101 mode mes queues 0\nnodes gpu_id zzz\n",
        )
        .unwrap();
        let ids = host_gpu_ids(&root);
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(ids, BTreeSet::from([1234, 45163, 0x5100, 0x5101]));
    }
}
