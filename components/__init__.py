"""One module per ComponentResource, plus the pure document builders they share with the policy
pack (loft_api, vcluster_values). Nothing is imported here, so importing one module does not load
every provider SDK."""
