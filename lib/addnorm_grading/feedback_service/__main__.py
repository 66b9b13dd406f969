"""`python -m addnorm_grading.feedback_service`: run the feedback service (see the package's docstring)."""

from addnorm_grading.feedback_service.service import FeedbackService

if __name__ == "__main__":
    FeedbackService.launch_instance()
