# SPDX-License-Identifier: GPL-2.0
# Sphinx configuration for kfd_preempt's Documentation/ (scripts/build-docs.sh).
project = "kfd_preempt"
author = "the kfd_preempt developers"
root_doc = "index"
exclude_patterns = ["bench"]
html_title = "kfd_preempt"
