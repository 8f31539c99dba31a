# The one input of every template the vCluster Platform runs. The platform declares this variable
# itself when it runs a template, so templates/node/main.tf and templates/environment/main.tf must
# not declare it (a second declaration would fail). This file exists only for local checks
# (`tofu validate`/`console` in a scratch copy next to a template); GcpNodeProvider never embeds it.
variable "vcluster" {
  description = "Provided by the vCluster Platform: the claim, node type, environment outputs and properties."
  type        = any
  sensitive   = true
}
