//! Chunk buffers aligned for `O_DIRECT`, and opening the aggregate's data descriptor with
//! `O_DIRECT` or, where refused, without.
