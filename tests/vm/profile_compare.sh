#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In the VM (scripts/profile.sh --baseline REV): the same calls on two
# builds of the module, alternately, so that their ratio is from one run:
# /kfdp/kfd_preempt.ko (this checkout) and /kfdp/extra/kfd_preempt_baseline.ko.
# Prints "=== kfdp-compare NAME: MODE K median_ns ..." lines; the daemons
# mode (16 schedulers at once, 1,024 queues over 64 tenants) gives its
# median and its p99.
for round in 1 2 3; do
	for name in baseline current; do
		ko=/kfdp/kfd_preempt.ko
		[ "$name" = baseline ] && ko=/kfdp/extra/kfd_preempt_baseline.ko
		rmmod kfd_preempt
		insmod "$ko" sim_nodes=2 sim_mes_nodes=2 || exit 1
		line="=== kfdp-compare $name:"
		for spec in "info 1 3000" "empty 1 3000" "validate 1 3000" "preempt 1 1000" "validate 64 500" \
			"preempt 64 300" "query 64 500" "freeze 1 500" "preempt 1024 30" \
			"query 1024 100"; do
			set -- $spec
			r=$(profile_batch "$1" "$2" "$3") || exit 1
			line="$line $1 $2 ${r##* }"
		done
		# 16 schedulers at once, 64 queues each: median and p99.
		r=$(profile_batch daemons 16 100) || exit 1
		set -- $r
		line="$line daemons_p50 16 $4 daemons_p99 16 $6"
		echo "$line"
	done
done
