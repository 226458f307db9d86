"""The sandbox's parts both hosts share: workspace file access and the limits of a job."""
