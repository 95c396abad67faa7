[package]
name = "dot_inference"
edition = "v0.11.0"
