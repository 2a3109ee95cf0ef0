#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In the VM (scripts/profile.sh --baseline REV): the same calls on two
# builds of the module, alternately, so that their ratio is from one run:
# /kfdp/kfd_preempt.ko (this checkout) and /kfdp/extra/kfd_preempt_baseline.ko.
# Prints "=== kfdp-compare NAME: MODE K median_ns ..." lines.
for round in 1 2 3; do
	for name in baseline current; do
		ko=/kfdp/kfd_preempt.ko
		[ "$name" = baseline ] && ko=/kfdp/extra/kfd_preempt_baseline.ko
		rmmod kfd_preempt
		insmod "$ko" sim_nodes=2 sim_mes_nodes=2 || exit 1
		line="=== kfdp-compare $name:"
		for spec in "info 1 3000" "validate 1 3000" "preempt 1 1000" "validate 64 500" \
			"preempt 64 300" "query 64 500" "freeze 1 500"; do
			set -- $spec
			r=$(profile_batch "$1" "$2" "$3") || exit 1
			line="$line $1 $2 ${r##* }"
		done
		echo "$line"
	done
done
