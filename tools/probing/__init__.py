"""The probes of tools/probe_inputs.py, by surface."""
