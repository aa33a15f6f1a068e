"""Files in and out: real images, HDF5 images, sample shards, splits, predictions, state dicts,
atomic writes."""
