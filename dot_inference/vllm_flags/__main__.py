"""`python -m dot_inference.vllm_flags <vllm-src-root> <out.yaml> [<sdist.tar.gz>]`."""

from dot_inference.vllm_flags import main

if __name__ == "__main__":
    main()
