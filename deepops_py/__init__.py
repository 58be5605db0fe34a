"""deepops: inventory of GPU machines in, validated Slurm GPU cluster out."""

__version__ = "0.1.0"
